-- EnableCursor / DisableCursor: what decides whether the outbox can
-- switch, once cursor_migrated.sql found outbox_cursor: the cursor row (active,
-- the leading relay and until when it leads; read without a lock, so that
-- the switch refuses early: leaving cursor mode, cursor_deactivate.sql
-- checks the lead again under a lock); a CDC relay's slot
-- registered for this outbox (cdc.New creates outbox_cdc_slots), which
-- reads PENDING inserts from the WAL and cannot serve QUEUED ones; and the
-- cache of the seq sequence, which must be 1 so that seqs are taken in
-- time order by every session (the gap rule of relay/cursor depends on it).
SELECT (SELECT c.active FROM {{schema}}.outbox_cursor c),
       (SELECT c.lease_owner FROM {{schema}}.outbox_cursor c WHERE c.lease_expires_at > now()),
       (SELECT c.lease_expires_at FROM {{schema}}.outbox_cursor c WHERE c.lease_expires_at > now()),
       (SELECT q.seqcache
        FROM pg_sequence q
        WHERE q.seqrelid = pg_get_serial_sequence('{{schema}}.outbox_messages', 'seq')::regclass),
       to_regclass('{{schema}}.outbox_cdc_slots') IS NOT NULL

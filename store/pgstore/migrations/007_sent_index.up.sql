-- Used by ops.Cleanup (the oldest SENT rows, in published_at order, in
-- bounded batches: a range scan at the index's left end, never a scan of the
-- table) and by ops.Stats (SENT in the last minute: a range scan at its right
-- end; the SENT count estimate: this index's pg_class.reltuples). Partial,
-- so that it holds nothing the relay is still working on.
--
-- Its price is one more index entry per message marked SENT (the mark is
-- never a HOT update anyway: status appears in the partial indexes'
-- predicates).
--
-- Migrate runs in a transaction, so this CREATE INDEX blocks writes to the
-- table while it builds (about a second per million rows). On a large
-- existing table, build it first without blocking, with the same name:
--   CREATE INDEX CONCURRENTLY outbox_messages_sent
--       ON <schema>.outbox_messages (published_at) WHERE status = 'SENT';
-- and this migration then finds it and does nothing.
CREATE INDEX IF NOT EXISTS outbox_messages_sent
    ON {{schema}}.outbox_messages (published_at)
    WHERE status = 'SENT';

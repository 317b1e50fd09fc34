-- Store.SetMode, leaving CDC mode, and Store.Mode for an outbox before
-- migration 017: the slots the CDC relays recorded for this outbox
-- (outbox_cdc_slots, which package cdc creates), their publications, and
-- each slot's state in this database: whether it exists (a recorded slot
-- that is gone, or a slot of that name in another database, has no row
-- here), whether PostgreSQL invalidated it (wal_status lost), and the
-- walsender streaming from it, if any (a CDC relay that runs).
SELECT r.slot_name, r.publication, s.slot_name IS NOT NULL, coalesce(s.wal_status = 'lost', false), s.active_pid
FROM {{schema}}.outbox_cdc_slots r
LEFT JOIN pg_replication_slots s ON s.slot_name = r.slot_name AND s.database = current_database()
ORDER BY r.slot_name

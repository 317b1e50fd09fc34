-- The slot's lag: WAL bytes between the server's current position and the
-- slot's confirmed position, and how much WAL may still be written before
-- the slot is invalidated (NULL when max_slot_wal_keep_size is unlimited).
-- $1 slot name.
SELECT coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn), 0)::bigint,
       active, coalesce(wal_status, ''), safe_wal_size, coalesce(confirmed_flush_lsn::text, '')
FROM pg_replication_slots
WHERE slot_name = $1

-- The slot's state: plugin, its database and ours, confirmed position,
-- wal_status ('lost' once PostgreSQL invalidated it), and whether a relay
-- streams from it. $1 slot name.
SELECT coalesce(plugin, ''), coalesce(database, ''), current_database(),
       coalesce(confirmed_flush_lsn::text, ''), coalesce(wal_status, ''), active
FROM pg_replication_slots
WHERE slot_name = $1

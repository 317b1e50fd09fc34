-- Run on the replication connection of the relay that took the slot's
-- advisory lock: its backend's pid and start, in microseconds since the
-- epoch, which lease_take.sql records as the lease's holder. The same
-- expression reads the start in lease_holder.sql.
SELECT pg_backend_pid(), (extract(epoch FROM backend_start) * 1000000)::bigint
FROM pg_stat_activity
WHERE pid = pg_backend_pid()

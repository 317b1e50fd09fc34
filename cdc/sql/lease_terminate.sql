-- After a standby took an expired lease: end the backends that hold the
-- slot's advisory lock (the hung relay's replication connection, see
-- Relay.tryLock) or stream from the slot, so that PostgreSQL frees both.
-- pg_terminate_backend needs the same role as the backend's, or
-- pg_signal_backend. A bigint advisory key shows in pg_locks as its high
-- and low 32 bits (classid, objid) with objsubid 1. It returns how many
-- backends were signalled. $1 slot, $2 advisory lock key.
SELECT count(*) FILTER (WHERE pg_terminate_backend(p.pid))
FROM (
    SELECT s.active_pid AS pid
    FROM pg_replication_slots s
    WHERE s.slot_name = $1
      AND s.active_pid IS NOT NULL
    UNION
    SELECT k.pid
    FROM pg_locks k
    WHERE k.locktype = 'advisory'
      AND k.granted
      AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND k.classid = (($2::bigint >> 32) & 4294967295)::oid
      AND k.objid = ($2::bigint & 4294967295)::oid
      AND k.objsubid = 1
) p
WHERE p.pid <> pg_backend_pid()

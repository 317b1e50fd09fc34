-- The backend the slot's lease records as its holder (lease_take.sql), if
-- it is still that backend (the same start; a pid is reused) and still
-- holds the slot's advisory lock or streams from the slot: the hung active
-- relay's replication connection, which a takeover terminates. Nothing
-- once that connection ended, even if another backend holds the lock now
-- (a standby that took it, or a relay of a version without the lease).
-- A backend of another role shows no start to a role without
-- pg_read_all_stats: its pid and the lock or slot name it then. A bigint
-- advisory key shows in pg_locks as its high and low 32 bits (classid,
-- objid) with objsubid 1. Read inside lease_seize.sql and
-- lease_terminate.sql; $1 slot, $2 advisory lock key.
SELECT l.holder_pid, l.holder_start
FROM {{schema}}.outbox_cdc_leases l
JOIN pg_stat_activity a ON a.pid = l.holder_pid
WHERE l.slot_name = $1
  AND (a.backend_start IS NULL OR (extract(epoch FROM a.backend_start) * 1000000)::bigint = l.holder_start)
  AND (a.pid IN (SELECT s.active_pid FROM pg_replication_slots s WHERE s.slot_name = $1 AND s.active_pid IS NOT NULL)
       OR a.pid IN (SELECT k.pid
                    FROM pg_locks k
                    WHERE k.locktype = 'advisory'
                      AND k.granted
                      AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                      AND k.classid = (($2::bigint >> 32) & 4294967295)::oid
                      AND k.objid = ($2::bigint & 4294967295)::oid
                      AND k.objsubid = 1))

-- After a standby took an expired lease (lease_seize.sql): end the backend
-- the lease recorded as its holder ($3 pid, $4 start), if it is still the
-- lease's holder and still holds the slot's advisory lock or streams from
-- the slot (lease_holder.sql), so that PostgreSQL frees both. No other
-- backend: one that took the lock meanwhile is a healthy relay. The
-- holder is no longer this backend's once another relay took the lease.
-- pg_terminate_backend needs the same role as the backend's, or
-- pg_signal_backend. It returns how many backends were signalled (0 or
-- 1). $1 slot, $2 advisory lock key.
SELECT count(*) FILTER (WHERE pg_terminate_backend(h.holder_pid))
FROM ({{lease_holder}}) h
WHERE h.holder_pid = $3
  AND h.holder_start = $4
  AND h.holder_pid <> pg_backend_pid()

-- The relay that just took the slot's advisory lock takes the lease,
-- whoever held it: the lock proves that no other relay streams from the
-- slot, and a relay that still holds the lease without the lock (its
-- replication connection ended, its pool still records) is fenced from
-- this commit on. It records its replication connection's backend as the
-- holder. $1 slot, $2 relay id, $3 new token, $4 lease in milliseconds,
-- $5 and $6 the backend's pid and start (backend_self.sql).
INSERT INTO {{schema}}.outbox_cdc_leases (slot_name, owner, token, expires_at, holder_pid, holder_start)
VALUES ($1, $2, $3, now() + $4::bigint * interval '1 millisecond', $5, $6)
ON CONFLICT (slot_name) DO UPDATE
SET owner = excluded.owner, token = excluded.token, expires_at = excluded.expires_at,
    holder_pid = excluded.holder_pid, holder_start = excluded.holder_start

-- The relay that just took the slot's advisory lock takes the lease,
-- whoever held it: the lock proves that no other relay streams from the
-- slot, and a relay that still holds the lease without the lock (its
-- replication connection ended, its pool still records) is fenced from
-- this commit on. $1 slot, $2 relay id, $3 new token, $4 lease in
-- milliseconds.
INSERT INTO {{schema}}.outbox_cdc_leases (slot_name, owner, token, expires_at)
VALUES ($1, $2, $3, now() + $4::bigint * interval '1 millisecond')
ON CONFLICT (slot_name) DO UPDATE
SET owner = excluded.owner, token = excluded.token, expires_at = excluded.expires_at

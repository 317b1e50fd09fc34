-- A standby (the advisory lock is held by another backend) takes the lease
-- if the active relay stopped renewing it while its replication
-- connection still holds the lock or the slot (lease_holder.sql): it is
-- held (a token) and expired. The row lock makes two standbys, or a
-- renewal, take turns; a renewal that committed first leaves the row
-- unexpired, and the standby finds no row. The holder stays recorded, for
-- lease_terminate.sql, until a relay takes the lock and the lease. It
-- returns the former owner, how long ago the lease ended, and the
-- holder's backend. $1 slot, $2 advisory lock key, $3 relay id, $4 new
-- token, $5 lease in milliseconds.
WITH old AS (
    SELECT l.owner, l.expires_at, l.holder_pid, l.holder_start
    FROM {{schema}}.outbox_cdc_leases l
    WHERE l.slot_name = $1
      AND l.token IS NOT NULL
      AND l.expires_at <= now()
      AND (l.holder_pid, l.holder_start) IN ({{lease_holder}})
    FOR UPDATE
)
UPDATE {{schema}}.outbox_cdc_leases l
SET owner = $3, token = $4, expires_at = now() + $5::bigint * interval '1 millisecond'
FROM old
WHERE l.slot_name = $1
RETURNING coalesce(old.owner, ''), extract(epoch FROM now() - old.expires_at)::float8, old.holder_pid, old.holder_start

-- A standby (the advisory lock is held by another relay) takes the lease
-- if the active relay stopped renewing it: it is held (a token) and
-- expired. The row lock makes two standbys, or a renewal, take turns; a
-- renewal that committed first leaves the row unexpired, and the standby
-- finds no row. It returns the former holder and how long ago the lease
-- ended. $1 slot, $2 relay id, $3 new token, $4 lease in milliseconds.
WITH old AS (
    SELECT owner, expires_at
    FROM {{schema}}.outbox_cdc_leases
    WHERE slot_name = $1
      AND token IS NOT NULL
      AND expires_at <= now()
    FOR UPDATE
)
UPDATE {{schema}}.outbox_cdc_leases l
SET owner = $2, token = $3, expires_at = now() + $4::bigint * interval '1 millisecond'
FROM old
WHERE l.slot_name = $1
RETURNING coalesce(old.owner, ''), extract(epoch FROM now() - old.expires_at)::float8

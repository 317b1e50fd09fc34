-- Cursor mode: whether the outbox is in cursor mode, and if so, an attempt
-- to lead it (a standby's, or a new Store's). The attempt succeeds only when
-- no relay leads: no lease, or an expired one. It returns the position to
-- start from, and what the last leader handled above it (migration 011).
--
-- $1 owner, $2 new lease token, $3 lease in milliseconds, $4 whether to try.
WITH cur AS (
    SELECT active FROM {{schema}}.outbox_cursor
), won AS (
    UPDATE {{schema}}.outbox_cursor
    SET lease_owner = $1,
        lease_token = $2,
        lease_expires_at = now() + $3::bigint * interval '1 millisecond'
    WHERE $4::bool
      AND active
      AND (lease_token IS NULL OR lease_expires_at <= now())
    RETURNING position, handled_head, unhandled_lo, unhandled_hi
)
SELECT coalesce((SELECT active FROM cur), false), won.position, won.handled_head, won.unhandled_lo, won.unhandled_hi
FROM (VALUES (1)) AS one (x)
LEFT JOIN won ON true

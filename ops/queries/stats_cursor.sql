-- Ops.Stats and Ops.Cursor: the cursor of cursor mode (pgstore's
-- EnableCursor), the one row of outbox_cursor, by the database clock. No
-- row (cursor mode was never on): every column but now() is NULL. leading:
-- a relay holds the cursor's lease now. The lag above the position is read
-- next, with the position as a parameter (stats_cursor_lag.sql).
SELECT now(), c.active, c.position, c.lease_owner, c.lease_expires_at,
       coalesce(c.lease_expires_at > now(), false), c.saved_at, c.enabled_at,
       -- What the leader handled above the position (migration 011), read
       -- through jsonb so that an outbox before that migration still
       -- answers (NULL).
       (to_jsonb(c) ->> 'handled_head')::bigint,
       coalesce(jsonb_array_length(nullif(to_jsonb(c) -> 'unhandled_lo', 'null'::jsonb)), 0)
FROM (SELECT) AS one
LEFT JOIN (SELECT * FROM {{schema}}.outbox_cursor LIMIT 1) AS c ON true

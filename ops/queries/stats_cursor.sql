-- Ops.Stats and Ops.Cursor: the cursor of cursor mode (pgstore's
-- EnableCursor) as outbox_cursor_state (migration 016) has it, by the
-- database clock. No cursor (cursor mode was never on): every column but
-- now() is NULL. The lag is read with the messages' states
-- (stats_cursor_lag.sql, stats_counts.sql).
SELECT now(), c.active, c.position, c.lease_owner, c.lease_expires_at,
       coalesce(c.leading_now, false), c.saved_at, c.enabled_at,
       c.handled_head, coalesce(c.unhandled_ranges, 0)
FROM (SELECT) AS one
LEFT JOIN (SELECT * FROM {{schema}}.outbox_cursor_state() LIMIT 1) AS c ON true

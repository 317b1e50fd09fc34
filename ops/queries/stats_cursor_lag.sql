-- Ops.Cursor: the cursor's lag, the unsent messages of cursor mode
-- (outbox_message_states: PENDING, by_cursor), and when the first of them
-- in seq order (the oldest: seq follows creation order) was created. Both
-- are a range scan of the primary key from the cursor's position, which
-- costs in proportion to the lag, never to the history below it.
SELECT (SELECT count(*)
        FROM {{schema}}.outbox_message_states(ARRAY['PENDING'], true) s),
       (SELECT s.created_at
        FROM {{schema}}.outbox_message_states(ARRAY['PENDING'], true) s
        ORDER BY s.seq
        LIMIT 1)

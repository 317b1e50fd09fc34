-- Ops.Stats and Ops.Cursor: the cursor's lag, the unsent QUEUED messages
-- above its position, and when the first of them in seq order (the oldest:
-- seq follows creation order) was created. QUEUED rows are in none of the
-- partial indexes, so both are a range scan of the primary key (seq) from
-- the position, which costs in proportion to the lag, never to the history
-- below it. The position is a parameter, read by stats_cursor.sql, rather
-- than a subquery, so that the planner knows the range is the table's
-- right end (a subquery's value is unknown when planning, and a third of
-- the table is assumed).
--
-- $1 the cursor's position.
SELECT (SELECT count(*)
        FROM {{schema}}.outbox_messages m
        WHERE m.seq > $1::bigint
          AND m.status = 'QUEUED'),
       (SELECT m.created_at
        FROM {{schema}}.outbox_messages m
        WHERE m.seq > $1::bigint
          AND m.status = 'QUEUED'
        ORDER BY m.seq
        LIMIT 1)

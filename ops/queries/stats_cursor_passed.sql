-- Ops.Stats: the QUEUED messages the cursor passed since an earlier Stats
-- of the same Ops saw it at position $1: they were sent in between. A range
-- scan of the primary key (seq) from $1 to the position, so it costs in
-- proportion to the messages sent in that time, as the range scan of
-- outbox_messages_sent in stats_head.sql does.
--
-- $1 the earlier position, $2 the position now (stats_cursor.sql).
SELECT count(*)
FROM {{schema}}.outbox_messages m
WHERE m.seq > $1::bigint
  AND m.seq <= $2::bigint
  AND m.status = 'QUEUED'

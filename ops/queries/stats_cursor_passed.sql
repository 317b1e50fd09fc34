-- Ops.Stats: the messages of cursor mode that the cursor passed since an
-- earlier Stats of the same Ops saw it at position $1 (outbox_message_states:
-- SENT, by_cursor, with a seq above $1): they were sent in between. A range
-- scan of the primary key from $1 to the position, so it costs in
-- proportion to the messages sent in that time, as the range scan of
-- outbox_messages_sent in stats_head.sql does.
--
-- $1 the earlier position, $2 the position now (stats_cursor.sql).
SELECT count(*)
FROM {{schema}}.outbox_message_states(ARRAY['SENT'], true) s
WHERE s.seq > $1::bigint
  AND s.seq <= $2::bigint

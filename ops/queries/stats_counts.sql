-- Ops.Stats: the messages per state (outbox_message_states, migration 016)
-- that are not SENT, split by by_cursor so that the unsent messages of
-- cursor mode (its lag) are known too. The states are literals, so the
-- function reads only the indexes that hold them: outbox_messages_due,
-- _dead and _discarded, and the primary key above the cursor's position;
-- never the SENT history.
SELECT s.state, s.by_cursor, count(*)
FROM {{schema}}.outbox_message_states(ARRAY['PENDING', 'IN_FLIGHT', 'FAILED', 'DEAD_LETTER', 'DISCARDED']) s
GROUP BY s.state, s.by_cursor

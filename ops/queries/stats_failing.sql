-- Ops.Stats: the event types with the most FAILED and DEAD_LETTER messages,
-- by their state (outbox_message_states): a FAILED message a relay holds
-- for its retry is IN_FLIGHT, and not counted here. Reads the unsent rows
-- of outbox_messages_due and the dead letters only.
--
-- $1 the most event types to return.
SELECT s.event_type,
       count(*) FILTER (WHERE s.state = 'FAILED'),
       count(*) FILTER (WHERE s.state = 'DEAD_LETTER')
FROM {{schema}}.outbox_message_states(ARRAY['FAILED', 'DEAD_LETTER'], false) s
GROUP BY s.event_type
ORDER BY count(*) DESC, s.event_type
LIMIT $1

-- Ops.Stats: the event types with the most FAILED and DEAD_LETTER messages.
-- Reads the partial index outbox_messages_unsent_by_aggregate and those
-- rows only.
--
-- $1 the most event types to return.
SELECT event_type,
       count(*) FILTER (WHERE status = 'FAILED'),
       count(*) FILTER (WHERE status = 'DEAD_LETTER')
FROM {{schema}}.outbox_messages
WHERE status IN ('FAILED', 'DEAD_LETTER')
GROUP BY event_type
ORDER BY count(*) DESC, event_type
LIMIT $1

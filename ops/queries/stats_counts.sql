-- Ops.Stats: the unsent and dead-lettered messages per status. The predicate
-- implies outbox_messages_unsent_by_aggregate's, so this reads that partial
-- index and the backlog's rows only, never the SENT history.
SELECT status, count(*)
FROM {{schema}}.outbox_messages
WHERE status IN ('PENDING', 'FAILED', 'IN_FLIGHT', 'DEAD_LETTER')
GROUP BY status

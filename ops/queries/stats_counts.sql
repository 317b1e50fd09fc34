-- Ops.Stats: the unsent and dead-lettered messages per status. The predicate
-- implies outbox_messages_unsent_by_aggregate's, so this reads that partial
-- index and the backlog's rows only, never the SENT history. A PENDING or
-- FAILED message with a lease token is IN_FLIGHT (pgstore's claim.sql leases
-- a row without changing its status).
SELECT CASE WHEN status IN ('PENDING', 'FAILED') AND lease_token IS NOT NULL THEN 'IN_FLIGHT'
            ELSE status END,
       count(*)
FROM {{schema}}.outbox_messages
WHERE status IN ('PENDING', 'FAILED', 'IN_FLIGHT', 'DEAD_LETTER')
GROUP BY 1

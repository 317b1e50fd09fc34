-- Ops.Stats: the event types with the most FAILED and DEAD_LETTER messages.
-- Reads the partial index outbox_messages_unsent_by_aggregate and those
-- rows only. A FAILED message a relay holds for its retry (a lease token;
-- pgstore's claim.sql leases a row without changing its status) is
-- IN_FLIGHT, as in stats_counts.sql, and not counted here.
--
-- $1 the most event types to return.
SELECT event_type,
       count(*) FILTER (WHERE status = 'FAILED'),
       count(*) FILTER (WHERE status = 'DEAD_LETTER')
FROM {{schema}}.outbox_messages
WHERE status IN ('FAILED', 'DEAD_LETTER')
  AND (status = 'DEAD_LETTER' OR lease_token IS NULL)
GROUP BY event_type
ORDER BY count(*) DESC, event_type
LIMIT $1

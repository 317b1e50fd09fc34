-- The earlier messages of m's aggregate that the table path holds
-- (PENDING, FAILED, IN_FLIGHT or DEAD_LETTER), for an EXISTS that probes
-- outbox_messages_unsent_by_aggregate: the status list is the index's
-- predicate, so that the planner can use it. claim_floor.sql and
-- cursor_columns.sql include it (placeholder earlier_unsent) and add their
-- own conditions after it.
SELECT 1
FROM {{schema}}.outbox_messages e
WHERE e.aggregate_type = m.aggregate_type
  AND e.aggregate_id = m.aggregate_id
  AND e.seq < m.seq
  AND e.status IN ('PENDING', 'FAILED', 'IN_FLIGHT', 'DEAD_LETTER')

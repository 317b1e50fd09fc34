-- When a slot is created: every aggregate that has an unsent message goes to
-- the table path, since the new slot's stream does not hold messages that
-- committed before it. Uses outbox_messages_unsent_by_aggregate.
INSERT INTO {{schema}}.outbox_cdc_deferred (aggregate_type, aggregate_id, reason)
SELECT DISTINCT coalesce(aggregate_type, ''), coalesce(aggregate_id, ''), 'unsent when the slot was created'
FROM {{schema}}.outbox_messages
WHERE status IN ('PENDING', 'FAILED', 'IN_FLIGHT', 'DEAD_LETTER')
ON CONFLICT DO NOTHING

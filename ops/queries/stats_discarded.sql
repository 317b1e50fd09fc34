-- Ops.Stats: discarded messages, through the partial index
-- outbox_messages_discarded (they are few).
SELECT count(*)
FROM {{schema}}.outbox_messages
WHERE status = 'DISCARDED'

-- The backlog: messages not yet sent (or dead). Uses the partial index
-- outbox_messages_due, so it reads the backlog, not the history.
SELECT count(*)
FROM {{schema}}.outbox_messages
WHERE status IN ('PENDING', 'FAILED', 'IN_FLIGHT')

-- Ops.DeadLetter and Ops.Audit: audit entries, newest first. With a message
-- id, only those that name it, through the GIN index
-- outbox_audit_message_ids.
--
-- $1 message id (NULL for all), $2 limit.
SELECT id, at, actor, action, reason, message_ids, filter, count
FROM {{schema}}.outbox_audit
WHERE $1::uuid IS NULL OR message_ids @> ARRAY[$1::uuid]
ORDER BY id DESC
LIMIT $2

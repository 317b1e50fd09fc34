-- Records one operation in the audit log.
--
-- $1 actor, $2 action, $3 reason, $4 message ids, $5 filter (JSON or NULL),
-- $6 count.
INSERT INTO {{schema}}.outbox_audit (actor, action, reason, message_ids, filter, count)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING id, at

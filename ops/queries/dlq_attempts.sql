-- Ops.DeadLetter: a message's attempt history in order, by the primary key
-- of outbox_attempts.
--
-- $1 seq.
SELECT attempt, error, dead, at
FROM {{schema}}.outbox_attempts
WHERE seq = $1
ORDER BY id

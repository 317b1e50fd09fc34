-- Ops.Replay and Ops.Discard by id: the seq and status of each message, by
-- the unique index on id.
--
-- $1 ids.
SELECT id, seq, status
FROM {{schema}}.outbox_messages
WHERE id = ANY ($1::uuid[])
ORDER BY seq

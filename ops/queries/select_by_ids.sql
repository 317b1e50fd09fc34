-- Ops.Replay and Ops.Discard by id: the seq and state of each message
-- (outbox_message_states, as Store.Get reports it), by the unique index on
-- id, so that a refusal names the state an operator knows.
--
-- $1 ids.
SELECT m.id, m.seq, m.state
FROM {{schema}}.outbox_message_states m
WHERE m.id = ANY ($1::uuid[])
ORDER BY m.seq

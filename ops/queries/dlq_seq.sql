-- Ops.DeadLetterBySeq: the event id of the message with a seq, by the
-- primary key.
--
-- $1 seq.
SELECT m.id FROM {{schema}}.outbox_message_states m WHERE m.seq = $1

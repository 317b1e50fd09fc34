-- Ops.DeadLetterBySeq: the event id of the message with a seq, by the
-- primary key.
--
-- $1 seq.
SELECT id FROM {{schema}}.outbox_messages WHERE seq = $1

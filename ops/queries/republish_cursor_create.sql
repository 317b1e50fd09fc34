-- Ops.Republish: a new cursor, bounded by the highest seq now (a primary key
-- lookup); later messages are the relay's. Does nothing if the name exists.
--
-- $1 name, $2 since, $3 aggregate type, $4 event type.
INSERT INTO {{schema}}.outbox_republish_cursors (name, since, aggregate_type, event_type, until_seq)
SELECT $1, $2, $3, $4, coalesce(max(m.seq), 0)
FROM {{schema}}.outbox_message_states m
ON CONFLICT (name) DO NOTHING

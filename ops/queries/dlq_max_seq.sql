-- Ops.Replay and Ops.Discard by filter: the highest seq when they start,
-- which bounds what they select, by a backward scan of the primary key.
SELECT coalesce(max(m.seq), 0) FROM {{schema}}.outbox_message_states m

-- The lowest and highest seq in the outbox table.
SELECT coalesce(min(seq), 0), coalesce(max(seq), 0) FROM {{schema}}.outbox_messages

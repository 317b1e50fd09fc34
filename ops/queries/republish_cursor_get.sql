-- Ops.Republish: a named cursor, by primary key.
--
-- $1 name.
SELECT name, since, aggregate_type, event_type, until_seq, last_seq, published,
       started_at, updated_at, finished_at
FROM {{schema}}.outbox_republish_cursors
WHERE name = $1

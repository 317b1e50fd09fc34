-- Ops.Republish with Restart: forget a cursor.
--
-- $1 name.
DELETE FROM {{schema}}.outbox_republish_cursors WHERE name = $1

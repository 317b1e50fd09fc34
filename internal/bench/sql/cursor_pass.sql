-- Cursor mode: the cursor passes every message in the table, as if the
-- leader had published them all: the claim phase's history of sent
-- messages, which in cursor mode is QUEUED rows below the position (one
-- UPDATE of one row; the messages' rows are not touched).
UPDATE {{schema}}.outbox_cursor
SET position = (SELECT coalesce(max(seq), 0) FROM {{schema}}.outbox_messages)

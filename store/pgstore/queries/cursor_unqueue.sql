-- DisableCursor, after cursor_deactivate.sql: the QUEUED messages the cursor
-- has not passed become PENDING, for the claims of claim mode. A range scan
-- of the primary key above the position.
UPDATE {{schema}}.outbox_messages
SET status = 'PENDING',
    next_attempt_at = now()
WHERE seq > (SELECT c.position FROM {{schema}}.outbox_cursor c)
  AND status = 'QUEUED'

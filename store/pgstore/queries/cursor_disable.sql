-- DisableCursor, after cursor_check.sql, in its transaction: new messages
-- are PENDING again (claim mode), the QUEUED messages the cursor has not
-- passed become PENDING (a range scan of the primary key above the
-- position), and the cursor row stays, inactive, so that QUEUED messages at
-- or below its position still count as sent (get.sql, counts.sql, package
-- ops). The messages move in cursor_unqueue.sql, after this.
ALTER TABLE {{schema}}.outbox_messages ALTER COLUMN status SET DEFAULT 'PENDING';

UPDATE {{schema}}.outbox_cursor
SET active = false,
    lease_owner = NULL,
    lease_token = NULL,
    lease_expires_at = NULL;

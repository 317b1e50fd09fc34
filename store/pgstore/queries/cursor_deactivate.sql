-- DisableCursor, after cursor_disable.sql, in its transaction: the cursor
-- row becomes inactive, unless a relay leads it (its lease has not
-- expired, as cursor_check.sql counts it). This is the check that decides:
-- cursor_check.sql, at the start of the switch, reads without a lock, and
-- a standby may have taken the lead since (cursor_state.sql). The UPDATE
-- locks the row: a lead taken before it is seen (no row changes, and the
-- switch is refused), and a standby that tries after it waits for the
-- switch and then finds the cursor inactive (it does not lead). The row
-- stays, so that QUEUED messages at or below its position still count as
-- sent (get.sql, counts.sql, package ops). The messages move in
-- cursor_unqueue.sql, after this.
UPDATE {{schema}}.outbox_cursor
SET active = false,
    lease_owner = NULL,
    lease_token = NULL,
    lease_expires_at = NULL
WHERE NOT coalesce(lease_expires_at > now(), false)

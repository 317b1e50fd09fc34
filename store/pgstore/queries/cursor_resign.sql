-- Cursor mode: a leader that stops saves its position and gives up its
-- lease, so that a standby takes over at once instead of after the lease.
--
-- $1 lease token, $2 position.
UPDATE {{schema}}.outbox_cursor
SET position = greatest(position, $2),
    lease_owner = NULL,
    lease_token = NULL,
    lease_expires_at = NULL,
    saved_at = now()
WHERE lease_token = $1

-- Marks the PENDING rows with seq in [$1, $2) SENT the way Store.MarkSent
-- does, without a lease token: the claim phase's "just marked" history.
UPDATE {{schema}}.outbox_messages
SET status = 'SENT',
    published_at = now(),
    lease_owner = NULL,
    lease_token = NULL,
    lease_expires_at = NULL,
    last_error = ''
WHERE seq >= $1 AND seq < $2
  AND status = 'PENDING'

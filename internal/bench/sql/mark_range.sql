-- Marks the PENDING rows with seq in [$1, $2) SENT the way Store.MarkSent
-- does (the rows were never leased, so there is no lease to clear): the
-- claim phase's "just marked" history.
UPDATE {{schema}}.outbox_messages
SET status = 'SENT',
    published_at = now(),
    last_error = ''
WHERE seq >= $1 AND seq < $2
  AND status = 'PENDING'

-- Mark the claimed rows SENT: a new row version with new index entries, or
-- an update in place on a schema whose indexes do not name status.
UPDATE outbox_messages
SET status = 'SENT', published_at = now(), lease_owner = NULL, lease_token = NULL,
    lease_expires_at = NULL, last_error = ''
WHERE seq = ANY (:seqs::bigint[])
  AND status IN ('PENDING', 'FAILED', 'IN_FLIGHT');

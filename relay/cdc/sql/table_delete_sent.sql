-- Cleanup "delete" on the table path: like pgstore's mark_sent.sql, fenced
-- by the lease token, but the rows are removed. $1 seqs, $2 lease token.
DELETE FROM {{schema}}.outbox_messages
WHERE seq = ANY ($1::bigint[])
  AND lease_token = $2
  AND status IN ('PENDING', 'FAILED', 'IN_FLIGHT')

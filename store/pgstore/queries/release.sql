-- Store.Release: give leased messages back, due at once, without counting an
-- attempt. Fenced like mark_sent.sql. The status changes only for a row
-- stored IN_FLIGHT by an earlier version; one leased by claim.sql is still
-- PENDING or FAILED. Finds rows by primary key (seq).
--
-- $1 seqs, $2 lease token.
UPDATE {{schema}}.outbox_messages
SET status = CASE WHEN attempts > 0 THEN 'FAILED' ELSE 'PENDING' END,
    next_attempt_at = now(),
    lease_owner = NULL,
    lease_token = NULL,
    lease_expires_at = NULL
WHERE seq = ANY ($1::bigint[])
  AND lease_token = $2
  AND status IN ('PENDING', 'FAILED', 'IN_FLIGHT')

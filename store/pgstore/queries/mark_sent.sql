-- Store.MarkSent. Fenced: only rows still IN_FLIGHT under the caller's lease
-- token change, so a relay whose lease was taken over changes nothing. A
-- leased row keeps its status PENDING or FAILED (claim.sql; rows leased by
-- earlier versions are IN_FLIGHT), so the token is the fence. Finds rows by
-- primary key (seq).
--
-- $1 seqs, $2 lease token.
UPDATE {{schema}}.outbox_messages
SET status = 'SENT',
    published_at = now(),
    lease_owner = NULL,
    lease_token = NULL,
    lease_expires_at = NULL,
    last_error = ''
WHERE seq = ANY ($1::bigint[])
  AND lease_token = $2
  AND status IN ('PENDING', 'FAILED', 'IN_FLIGHT')

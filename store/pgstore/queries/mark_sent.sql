-- Store.MarkSent. Fenced: only rows still IN_FLIGHT under the caller's lease
-- token change, so a relay whose lease was taken over changes nothing.
-- Finds rows by primary key (seq).
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
  AND status = 'IN_FLIGHT'

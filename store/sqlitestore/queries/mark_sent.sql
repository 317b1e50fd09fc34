-- Store.MarkSent. Fenced: only rows still IN_FLIGHT under the caller's lease
-- token change, so a relay whose lease was taken over changes nothing.
-- Finds rows by primary key (seq); the seqs arrive as one JSON array.
--
-- ?1 seqs (JSON array of integers), ?2 lease token.
UPDATE "{{prefix}}messages"
SET status = 'SENT',
    published_at = {{now_ms}},
    lease_owner = NULL,
    lease_token = NULL,
    lease_expires_at = NULL,
    last_error = ''
WHERE seq IN (SELECT value FROM json_each(?1))
  AND lease_token = ?2
  AND status = 'IN_FLIGHT'

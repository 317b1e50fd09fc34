-- Store.Release: give leased messages back, due at once, without counting an
-- attempt. Fenced like mark_sent.sql. Finds rows by primary key (seq).
--
-- ?1 seqs (JSON array of integers), ?2 lease token.
UPDATE "{{prefix}}messages"
SET status = CASE WHEN attempts > 0 THEN 'FAILED' ELSE 'PENDING' END,
    next_attempt_at = {{now_ms}},
    lease_owner = NULL,
    lease_token = NULL,
    lease_expires_at = NULL
WHERE seq IN (SELECT value FROM json_each(?1))
  AND lease_token = ?2
  AND status = 'IN_FLIGHT'

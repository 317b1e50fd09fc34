-- Store.Claim, step 3: is a message due at or beyond the end of the span
-- of claim_by_seq.sql? Only then can the scan by aggregate find a head the
-- walk did not see. A scan of messages_due from there that stops at the
-- first due entry.
--
-- ?1 the end of the span.
SELECT u.seq
FROM "{{prefix}}messages" AS u
WHERE u.status IN ('PENDING', 'FAILED', 'IN_FLIGHT')
  AND u.seq >= ?1
  AND (   (u.status IN ('PENDING', 'FAILED') AND u.next_attempt_at <= {{now_ms}})
       OR (u.status = 'IN_FLIGHT' AND u.lease_expires_at <= {{now_ms}}))
ORDER BY u.seq
LIMIT 1

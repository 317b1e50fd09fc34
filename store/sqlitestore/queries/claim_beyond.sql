-- Store.Claim, step 2: is there an unsent message beyond the first ?1 in
-- seq order (the span claim_by_seq.sql looked at)? Only then can the scan
-- by aggregate find a head the walk in seq order did not see. Reads ?1 + 1
-- entries of messages_due and no row.
--
-- ?1 span.
SELECT u.seq
FROM "{{prefix}}messages" AS u
WHERE u.status IN ('PENDING', 'FAILED', 'IN_FLIGHT')
ORDER BY u.seq
LIMIT 1 OFFSET ?1

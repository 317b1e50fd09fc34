-- Store.Claim, step 1 (claim.go runs the steps in one write transaction,
-- which holds SQLite's single write lock: no other connection writes
-- meanwhile, so the steps need no row locks and two claims can never pick
-- the same row): the first due message in seq order, where the walk of
-- claim_by_seq.sql starts. No row when nothing is due, and the claim ends
-- there.
--
-- The same term as the partial index messages_due, so the planner can use
-- it: a scan in seq order over unsent rows only, past those in flight.
SELECT u.seq
FROM "{{prefix}}messages" AS u
WHERE u.status IN ('PENDING', 'FAILED', 'IN_FLIGHT')
  AND (   (u.status IN ('PENDING', 'FAILED') AND u.next_attempt_at <= {{now_ms}})
       OR (u.status = 'IN_FLIGHT' AND u.lease_expires_at <= {{now_ms}}))
ORDER BY u.seq
LIMIT 1

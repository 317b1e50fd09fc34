-- Store.Claim, step 2: the due heads of aggregates with seqs in [?2, ?3),
-- oldest first: a message is claimable if it is due and nothing earlier of
-- its aggregate is unsent. ?2 is the first due seq and ?3 a span past it
-- (claim.go), which bounds the walk: when the backlog sits on a few
-- aggregates (a hot aggregate, or the queues a broker outage leaves),
-- almost no row is a head, and a walk to the end of the backlog read all of
-- it, holding the write lock. claim_by_aggregate.sql finds the heads
-- beyond.
--
-- ?1 limit, ?2 the first due seq, ?3 the end of the span (exclusive).
SELECT m.seq
FROM "{{prefix}}messages" AS m
-- The term of the partial index messages_due: a range scan of it.
WHERE m.status IN ('PENDING', 'FAILED', 'IN_FLIGHT')
  AND m.seq >= ?2
  AND m.seq < ?3
  AND (   (m.status IN ('PENDING', 'FAILED') AND m.next_attempt_at <= {{now_ms}})
       OR (m.status = 'IN_FLIGHT' AND m.lease_expires_at <= {{now_ms}}))
  -- Only the head of an aggregate: nothing earlier of it is unsent.
  -- Uses messages_unsent_by_aggregate (one range probe per row).
  AND NOT EXISTS (
      SELECT 1
      FROM "{{prefix}}messages" AS e
      WHERE e.aggregate_type = m.aggregate_type
        AND e.aggregate_id = m.aggregate_id
        AND e.seq < m.seq
        AND e.status IN ('PENDING', 'FAILED', 'IN_FLIGHT', 'DEAD_LETTER'))
ORDER BY m.seq
LIMIT ?1

-- Store.Claim with runs (ClaimParams.MaxRun above 1), the step before the
-- last, once per head: the candidates of the run of head ?1, the first ?2
-- unsent messages of its aggregate after it in seq order, each with
-- whether it is due and its payload's size, and the head's payload size.
-- run.go takes them in order up to the first that is not due or would take
-- the run's payload beyond MaxRunBytes. The head by primary key, then a
-- range scan of messages_unsent_by_aggregate from the head's key on. The
-- claim's write transaction holds SQLite's write lock: no row changes
-- meanwhile, and no other claim holds one, so none is skipped.
--
-- ?1 the head's seq, ?2 the most candidates.
SELECT e.seq,
       coalesce(   (e.status IN ('PENDING', 'FAILED') AND e.next_attempt_at <= {{now_ms}})
                OR (e.status = 'IN_FLIGHT' AND e.lease_expires_at <= {{now_ms}}), 0) AS due,
       length(e.payload),
       length(h.payload)
FROM "{{prefix}}messages" AS h
JOIN "{{prefix}}messages" AS e
  ON e.aggregate_type = h.aggregate_type
 AND e.aggregate_id = h.aggregate_id
 AND e.seq > h.seq
WHERE h.seq = ?1
  -- The term of the partial index messages_unsent_by_aggregate.
  AND e.status IN ('PENDING', 'FAILED', 'IN_FLIGHT', 'DEAD_LETTER')
ORDER BY e.seq
LIMIT ?2

-- Store.Claim, step 4: the heads beyond the span of claim_by_seq.sql. A
-- skip scan of messages_unsent_by_aggregate steps from one aggregate with
-- unsent messages to the next, one or two index probes each; an
-- aggregate's first entry is its head. It starts after the aggregate
-- (?1, ?2) and, when ?3 is true, stops at the aggregate (?4, ?5): queue.go
-- starts after the aggregate the store's previous scan ended with and
-- wraps around, so that no aggregate waits for the others to drain. At most
-- ?6 aggregates. Rows come in key order, each with whether its head is due;
-- claim.go stops reading once it has enough.
--
-- ?1, ?2 the aggregate (type, id) after which to start, ?3 true to stop at
-- (?4, ?5) inclusive, false to run to the last aggregate, ?6 the most
-- aggregates to visit.
WITH RECURSIVE agg (seq, aggregate_type, aggregate_id, step, due) AS (
    SELECT NULL, ?1, ?2, 0, 0
    UNION ALL
    SELECT e.seq, e.aggregate_type, e.aggregate_id, a.step + 1,
           (   (e.status IN ('PENDING', 'FAILED') AND e.next_attempt_at <= {{now_ms}})
            OR (e.status = 'IN_FLIGHT' AND e.lease_expires_at <= {{now_ms}}))
    FROM agg AS a
    -- The first entry of the next aggregate of the same type, else of the
    -- first aggregate of the next type: two range probes, each with the
    -- term of the partial index messages_unsent_by_aggregate. (A row
    -- comparison, (f.aggregate_type, f.aggregate_id) > (a.aggregate_type,
    -- a.aggregate_id), read every entry of the aggregate it starts from:
    -- 6 ms behind 20,000 messages of one aggregate.)
    JOIN "{{prefix}}messages" AS e ON e.seq = coalesce(
        (SELECT f.seq
         FROM "{{prefix}}messages" AS f
         WHERE f.status IN ('PENDING', 'FAILED', 'IN_FLIGHT', 'DEAD_LETTER')
           AND f.aggregate_type = a.aggregate_type
           AND f.aggregate_id > a.aggregate_id
         ORDER BY f.aggregate_id, f.seq
         LIMIT 1),
        (SELECT f.seq
         FROM "{{prefix}}messages" AS f
         WHERE f.status IN ('PENDING', 'FAILED', 'IN_FLIGHT', 'DEAD_LETTER')
           AND f.aggregate_type > a.aggregate_type
         ORDER BY f.aggregate_type, f.aggregate_id, f.seq
         LIMIT 1))
    -- Stop at the step bound, and after the stop aggregate (the row past
    -- it is read and dropped below).
    WHERE a.step < ?6
      AND (NOT ?3 OR (a.aggregate_type, a.aggregate_id) < (?4, ?5))
)
-- (Joining agg with the table here for the heads' status took 2 ms behind
-- 20,000 messages of one aggregate, against 0.2 ms for this; the step reads
-- the head's row anyway.)
SELECT a.seq, a.aggregate_type, a.aggregate_id, a.due
FROM agg AS a
WHERE a.step > 0
  AND (NOT ?3 OR (a.aggregate_type, a.aggregate_id) <= (?4, ?5))

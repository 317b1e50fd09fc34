-- Store.Claim, step 1 (queue.go runs the steps in one write transaction,
-- which holds SQLite's single write lock: no other connection writes
-- meanwhile, so the steps need no row locks and two claims can never pick
-- the same row).
--
-- The due heads of aggregates among the first ?2 unsent messages in seq
-- order, oldest first: a message is claimable if it is due and nothing
-- earlier of its aggregate is unsent. The inner SELECT bounds the walk, so
-- that a backlog sitting on a few aggregates (a hot aggregate, or the
-- queues a broker outage leaves), where almost no row is a head, costs ?2
-- index entries rather than the whole backlog; claim_by_aggregate.sql finds
-- the heads beyond it.
--
-- ?1 limit, ?2 span (how many unsent messages the walk looks at).
SELECT m.seq
FROM (
    -- The same term as the partial index messages_due, so the planner can
    -- use it: a scan in seq order over unsent rows only.
    SELECT u.seq, u.aggregate_type, u.aggregate_id, u.status, u.next_attempt_at, u.lease_expires_at
    FROM "{{prefix}}messages" AS u
    WHERE u.status IN ('PENDING', 'FAILED', 'IN_FLIGHT')
    ORDER BY u.seq
    LIMIT ?2
) AS m
WHERE (   (m.status IN ('PENDING', 'FAILED') AND m.next_attempt_at <= {{now_ms}})
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

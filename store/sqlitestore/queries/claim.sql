-- Store.Claim: one statement, and so one write transaction, which takes
-- SQLite's single write lock at its start. SQLite has no FOR UPDATE SKIP
-- LOCKED and needs none: while this runs no other connection writes, so two
-- claims can never pick the same row. The inner SELECT picks the due heads
-- of aggregates; the UPDATE leases them.
--
-- ?1 limit, ?2 lease owner, ?3 lease token, ?4 lease length in milliseconds.
UPDATE "{{prefix}}messages"
SET status = 'IN_FLIGHT',
    lease_owner = ?2,
    lease_token = ?3,
    lease_expires_at = {{now_ms}} + ?4
WHERE seq IN (
    SELECT m.seq
    FROM "{{prefix}}messages" AS m
    -- The same term as the partial index messages_due, so the planner can
    -- use it: a scan in seq order over unsent rows only.
    WHERE m.status IN ('PENDING', 'FAILED', 'IN_FLIGHT')
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
)
RETURNING seq, id, aggregate_type, aggregate_id, event_type, event_version,
          topic, payload, content_type, headers, correlation_id, causation_id,
          traceparent, created_at, status, attempts, next_attempt_at, last_error,
          lease_owner, lease_expires_at, published_at

-- Store.Claim: one autocommit statement. The CTE picks due heads of
-- aggregates and locks them, skipping rows another claim holds; the UPDATE
-- leases them. No transaction stays open after it returns.
--
-- $1 limit, $2 lease owner, $3 lease token, $4 lease length in milliseconds,
-- $5 the claim floor: the scan starts there (0 for a full claim; see
-- queue.go). Only the scan is bounded: the ordering probe below looks at
-- every earlier unsent message of the aggregate, whatever the floor.
WITH due AS (
    SELECT m.seq
    FROM {{schema}}.outbox_messages m
    -- The same predicate as outbox_messages_due, so the planner can use that
    -- partial index: a scan in seq order over unsent rows only.
    WHERE m.status IN ('PENDING', 'FAILED', 'IN_FLIGHT')
      AND m.seq >= $5
      AND (   (m.status IN ('PENDING', 'FAILED') AND m.next_attempt_at <= now())
           OR (m.status = 'IN_FLIGHT' AND m.lease_expires_at <= now()))
      -- Only the head of an aggregate: nothing earlier of it is unsent.
      -- Uses outbox_messages_unsent_by_aggregate (one range probe per row).
      AND NOT EXISTS (
          SELECT 1
          FROM {{schema}}.outbox_messages e
          WHERE e.aggregate_type = m.aggregate_type
            AND e.aggregate_id = m.aggregate_id
            AND e.seq < m.seq
            AND e.status IN ('PENDING', 'FAILED', 'IN_FLIGHT', 'DEAD_LETTER'))
    ORDER BY m.seq
    LIMIT $1
    FOR UPDATE SKIP LOCKED
)
UPDATE {{schema}}.outbox_messages m
SET status = 'IN_FLIGHT',
    lease_owner = $2,
    lease_token = $3,
    lease_expires_at = now() + $4::bigint * interval '1 millisecond'
-- = ANY of the CTE's seqs rather than a join with it: the relay runs with
-- plan_cache_mode = force_generic_plan (relay_settings.sql), and a generic
-- plan does not know LIMIT $1. It expected a tenth of the table from the
-- CTE and joined it with a merge join over the whole primary key: 680 ms
-- per claim of 100 with 175,000 sent rows, and a drain of 200,000 that
-- slowed to 1,300 messages/s. An array of seqs is a probe per seq in any
-- plan (TestClaim_GenericPlanProbesThePrimaryKeyPerSeq).
WHERE m.seq = ANY (ARRAY(SELECT seq FROM due))
RETURNING m.seq, m.id, m.aggregate_type, m.aggregate_id, m.event_type, m.event_version,
          m.topic, m.payload, m.content_type, m.headers, m.correlation_id, m.causation_id,
          m.traceparent, m.created_at, m.status, m.attempts, m.next_attempt_at, m.last_error,
          m.lease_owner, m.lease_expires_at, m.published_at

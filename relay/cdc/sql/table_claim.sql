-- The table path's claim: the polling relay's claim (store/pgstore
-- queries/claim.sql), restricted to deferred aggregates. The release of
-- aggregates that have nothing unsent any more runs before it
-- (table_release.sql).
--
-- $1 limit, $2 lease owner, $3 lease token, $4 lease length in milliseconds.
WITH heads AS (
    -- The aggregate's oldest unsent message, through
    -- outbox_messages_unsent_by_aggregate.
    SELECT h.seq
    FROM {{schema}}.outbox_cdc_deferred d
    CROSS JOIN LATERAL (
        SELECT e.seq FROM {{schema}}.outbox_messages e
        WHERE e.aggregate_type = d.aggregate_type
          AND e.aggregate_id = d.aggregate_id
          AND e.status IN ('PENDING', 'FAILED', 'IN_FLIGHT', 'DEAD_LETTER')
        ORDER BY e.seq
        LIMIT 1) h
),
due AS (
    SELECT m.seq
    FROM {{schema}}.outbox_messages m
    JOIN heads ON heads.seq = m.seq
    WHERE (m.status IN ('PENDING', 'FAILED') AND m.next_attempt_at <= now())
       OR (m.status = 'IN_FLIGHT' AND m.lease_expires_at <= now())
    ORDER BY m.seq
    LIMIT $1
    FOR UPDATE OF m SKIP LOCKED
)
-- Leases like claim.sql: status stays, next_attempt_at is the lease's end.
UPDATE {{schema}}.outbox_messages m
SET next_attempt_at = now() + $4::bigint * interval '1 millisecond',
    lease_owner = $2,
    lease_token = $3,
    lease_expires_at = now() + $4::bigint * interval '1 millisecond'
FROM due
WHERE m.seq = due.seq
RETURNING m.seq, m.id, m.aggregate_type, m.aggregate_id, m.event_type, m.event_version,
          m.topic, m.payload, m.content_type, m.headers, m.correlation_id, m.causation_id,
          m.traceparent, m.created_at, 'IN_FLIGHT', m.attempts, m.next_attempt_at, m.last_error,
          m.lease_owner, m.lease_expires_at, m.published_at

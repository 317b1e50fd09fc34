-- Store.Get: one message by event id, through the unique index on id.
--
-- A QUEUED message (cursor mode, cursor.go) is reported as SENT once the
-- cursor's saved position passed it and as PENDING before; its published_at
-- stays NULL (the cursor does not record when each message went out). A
-- PENDING or FAILED message with a lease token is IN_FLIGHT: claim.sql
-- leases a row without changing its status.
--
-- $1 id.
SELECT m.seq, m.id, m.aggregate_type, m.aggregate_id, m.event_type, m.event_version,
       m.topic, m.payload, m.content_type, m.headers, m.correlation_id, m.causation_id,
       m.traceparent, m.created_at,
       CASE WHEN m.status IN ('PENDING', 'FAILED') AND m.lease_token IS NOT NULL THEN 'IN_FLIGHT'
            WHEN m.status <> 'QUEUED' THEN m.status
            WHEN m.seq <= (SELECT c.position FROM {{schema}}.outbox_cursor c) THEN 'SENT'
            ELSE 'PENDING' END,
       m.attempts, m.next_attempt_at, m.last_error,
       m.lease_owner, m.lease_expires_at, m.published_at
FROM {{schema}}.outbox_messages m
WHERE m.id = $1

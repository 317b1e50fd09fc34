-- Store.Get: one message by event id, through the unique index on id.
--
-- ?1 id.
SELECT seq, id, aggregate_type, aggregate_id, event_type, event_version,
       topic, payload, content_type, headers, correlation_id, causation_id,
       traceparent, created_at, status, attempts, next_attempt_at, last_error,
       lease_owner, lease_expires_at, published_at
FROM "{{prefix}}messages"
WHERE id = ?1

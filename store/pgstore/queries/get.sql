-- Store.Get: one message by event id, through the unique index on id, with
-- its state as outbox_message_states (migration 016) defines it: a PENDING
-- or FAILED message with a lease token is IN_FLIGHT (claim.sql leases a row
-- without changing its status), and a QUEUED message (cursor mode,
-- package relay/cursor) is SENT once the cursor's saved position passed it and
-- PENDING before; its published_at stays NULL (the cursor does not record
-- when each message went out).
--
-- $1 id.
SELECT m.seq, m.id, m.aggregate_type, m.aggregate_id, m.event_type, m.event_version,
       m.topic, m.payload, m.content_type, m.headers, m.correlation_id, m.causation_id,
       m.traceparent, m.created_at, m.state, m.attempts, m.next_attempt_at, m.last_error,
       m.lease_owner, m.lease_expires_at, m.published_at
FROM {{schema}}.outbox_message_states() m
WHERE m.id = $1

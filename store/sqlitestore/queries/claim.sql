-- Store.Claim, the last step: lease the messages the steps before picked
-- (the heads, and with runs their followers). Still due (the steps ran in
-- this write transaction, so they are), by primary key.
--
-- ?1 seqs (JSON array of integers), ?2 lease owner, ?3 lease token, ?4
-- lease length in milliseconds.
UPDATE "{{prefix}}messages"
SET status = 'IN_FLIGHT',
    lease_owner = ?2,
    lease_token = ?3,
    lease_expires_at = {{now_ms}} + ?4
WHERE seq IN (SELECT value FROM json_each(?1))
  AND (   (status IN ('PENDING', 'FAILED') AND next_attempt_at <= {{now_ms}})
       OR (status = 'IN_FLIGHT' AND lease_expires_at <= {{now_ms}}))
RETURNING seq, id, aggregate_type, aggregate_id, event_type, event_version,
          topic, payload, content_type, headers, correlation_id, causation_id,
          traceparent, created_at, status, attempts, next_attempt_at, last_error,
          lease_owner, lease_expires_at, published_at

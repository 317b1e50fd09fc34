-- Cleanup "delete": messages the broker acknowledged from the stream are
-- removed. Only rows still PENDING go. $1 seqs.
DELETE FROM {{schema}}.outbox_messages
WHERE seq = ANY ($1::bigint[])
  AND status = 'PENDING'

-- Ops.Republish: the next batch of SENT messages after the cursor, in seq
-- order, by a range scan of the primary key. Messages created before the
-- cursor's since are skipped; the first batch of a run over a long history
-- steps over them once, and the cursor then moves past them.
--
-- In cursor mode a QUEUED message at or below outbox_cursor's position is
-- SENT too (pgstore's get.sql); one above it is not sent yet, and is the
-- relay's. Without a cursor row no QUEUED row counts.
--
-- $1 after seq, $2 up to seq, $3 created at or after, $4 aggregate type and
-- $5 event type ('' for any), $6 limit.
SELECT {{record_columns}}
FROM {{schema}}.outbox_messages
WHERE seq > $1::bigint
  AND seq <= $2::bigint
  AND (status = 'SENT'
       OR (status = 'QUEUED' AND seq <= (SELECT c.position FROM {{schema}}.outbox_cursor c)))
  AND created_at >= $3::timestamptz
  AND ($4::text = '' OR aggregate_type = $4)
  AND ($5::text = '' OR event_type = $5)
ORDER BY seq
LIMIT $6

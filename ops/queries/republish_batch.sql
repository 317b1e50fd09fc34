-- Ops.Republish: the next batch of SENT messages after the cursor, in seq
-- order, by a range scan of the primary key, with their state
-- (outbox_message_states): those claims marked SENT and, in cursor mode,
-- those the cursor passed; a message of cursor mode above the cursor's
-- position is not sent yet, and is the relay's. Messages created before
-- the cursor's since are skipped; the first batch of a run over a long
-- history steps over them once, and the cursor then moves past them.
--
-- $1 after seq, $2 up to seq, $3 created at or after, $4 aggregate type and
-- $5 event type ('' for any), $6 limit.
SELECT {{record_columns}}
FROM {{schema}}.outbox_message_states(ARRAY['SENT']) s
WHERE s.seq > $1::bigint
  AND s.seq <= $2::bigint
  AND s.created_at >= $3::timestamptz
  AND ($4::text = '' OR s.aggregate_type = $4)
  AND ($5::text = '' OR s.event_type = $5)
ORDER BY s.seq
LIMIT $6

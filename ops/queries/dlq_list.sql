-- Ops.DeadLetters, and the selection of Ops.Replay by filter: dead letters
-- in seq order. The status predicate implies that of the partial index
-- outbox_messages_unsent_by_aggregate, so only unsent rows are read.
-- dead_at is when the message became a dead letter: its last recorded
-- attempt that dead-lettered it (outbox_attempts, by primary key), or, for a
-- message dead-lettered before that history existed, its next_attempt_at.
-- waiting counts the later messages of its aggregate that it holds back.
--
-- $1 aggregate type, $2 aggregate id, $3 event type ('' for any), $4 dead at
-- or after, $5 seq greater than, $6 limit (NULL for none).
SELECT m.seq, m.id, m.aggregate_type, m.aggregate_id, m.event_type, m.topic,
       m.created_at, d.dead_at, m.attempts, m.last_error,
       (SELECT count(*)
        FROM {{schema}}.outbox_messages l
        WHERE l.aggregate_type = m.aggregate_type
          AND l.aggregate_id = m.aggregate_id
          AND l.seq > m.seq
          AND l.status IN ('PENDING', 'FAILED', 'IN_FLIGHT', 'DEAD_LETTER')) AS waiting
FROM {{schema}}.outbox_messages m
CROSS JOIN LATERAL (
    SELECT coalesce((SELECT max(a.at)
                     FROM {{schema}}.outbox_attempts a
                     WHERE a.seq = m.seq AND a.dead), m.next_attempt_at) AS dead_at
) d
WHERE m.status = 'DEAD_LETTER'
  AND ($1::text = '' OR m.aggregate_type = $1)
  AND ($2::text = '' OR m.aggregate_id = $2)
  AND ($3::text = '' OR m.event_type = $3)
  AND d.dead_at >= $4::timestamptz
  AND m.seq > $5::bigint
ORDER BY m.seq
LIMIT $6::bigint

-- Ops.Stats: blocked aggregates. An aggregate is blocked when its head (its
-- lowest-seq message that is not SENT or DISCARDED) is a dead letter and at
-- least one later message of it waits behind that dead letter. The relay
-- publishes nothing of a blocked aggregate until the dead letter is
-- replayed or discarded.
--
-- Starts from the dead letters (few; a bitmap scan of the partial index
-- outbox_messages_unsent_by_aggregate), then probes that index per dead
-- letter for an earlier unsent message and counts the later ones.
--
-- $1 the most aggregates to list, oldest dead letter first; the first
-- column counts them all.
SELECT count(*) OVER (), d.aggregate_type, d.aggregate_id, d.id, d.event_type, w.waiting
FROM {{schema}}.outbox_messages d
CROSS JOIN LATERAL (
    SELECT count(*) AS waiting
    FROM {{schema}}.outbox_messages l
    WHERE l.aggregate_type = d.aggregate_type
      AND l.aggregate_id = d.aggregate_id
      AND l.seq > d.seq
      AND l.status IN ('PENDING', 'FAILED', 'IN_FLIGHT', 'DEAD_LETTER')
) w
WHERE d.status = 'DEAD_LETTER'
  AND w.waiting > 0
  AND NOT EXISTS (
      SELECT 1
      FROM {{schema}}.outbox_messages e
      WHERE e.aggregate_type = d.aggregate_type
        AND e.aggregate_id = d.aggregate_id
        AND e.seq < d.seq
        AND e.status IN ('PENDING', 'FAILED', 'IN_FLIGHT', 'DEAD_LETTER'))
ORDER BY d.seq
LIMIT $1

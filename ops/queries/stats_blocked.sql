-- Ops.Stats: blocked aggregates. An aggregate is blocked when its head (its
-- lowest-seq message that is not SENT or DISCARDED) is a dead letter and at
-- least one later message of it waits behind that dead letter. The relay
-- publishes nothing of a blocked aggregate until the dead letter is
-- replayed or discarded.
--
-- Starts from the dead letters (few; outbox_messages_dead), then probes
-- outbox_messages_unsent_by_aggregate per dead letter for an earlier
-- unsent message and counts the later ones. The messages that block or
-- wait are those claims publish (by_cursor false): cursor mode moves the
-- later messages of an aggregate whose message failed to them, and its own
-- unsent messages are in no index by aggregate.
--
-- $1 the most aggregates to list, oldest dead letter first; the first
-- column counts them all.
SELECT count(*) OVER (), d.aggregate_type, d.aggregate_id, d.id, d.event_type, w.waiting
FROM {{schema}}.outbox_message_states(ARRAY['DEAD_LETTER']) d
CROSS JOIN LATERAL (
    SELECT count(*) AS waiting
    FROM {{schema}}.outbox_message_states(ARRAY['PENDING', 'FAILED', 'IN_FLIGHT', 'DEAD_LETTER'], false) l
    WHERE l.aggregate_type = d.aggregate_type
      AND l.aggregate_id = d.aggregate_id
      AND l.seq > d.seq
) w
WHERE w.waiting > 0
  AND NOT EXISTS (
      SELECT 1
      FROM {{schema}}.outbox_message_states(ARRAY['PENDING', 'FAILED', 'IN_FLIGHT', 'DEAD_LETTER'], false) e
      WHERE e.aggregate_type = d.aggregate_type
        AND e.aggregate_id = d.aggregate_id
        AND e.seq < d.seq)
ORDER BY d.seq
LIMIT $1

-- Ops.DeadLetters, and each batch of Ops.Replay and Ops.Discard by filter:
-- the dead letters that dead_letters.sql selects (its parameters), in seq
-- order, with the error class and group key as there. waiting counts the
-- later messages of its aggregate that a dead letter holds back: those not
-- SENT or DISCARDED that claims publish (by_cursor false; cursor mode moves
-- the later messages of an aggregate whose message failed to them),
-- through outbox_messages_unsent_by_aggregate.
--
-- $6 limit (NULL for none).
SELECT s.seq, s.id, s.aggregate_type, s.aggregate_id, s.event_type, s.topic,
       s.created_at, s.dead_at, s.attempts, s.last_error, s.error_class, s.group_key,
       (SELECT count(*)
        FROM {{schema}}.outbox_message_states(ARRAY['PENDING', 'FAILED', 'IN_FLIGHT', 'DEAD_LETTER'], false) l
        WHERE l.aggregate_type = s.aggregate_type
          AND l.aggregate_id = s.aggregate_id
          AND l.seq > s.seq) AS waiting
FROM ({{dead_letters}}) s
ORDER BY s.seq
LIMIT $6::bigint

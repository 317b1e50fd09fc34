-- Ops.DeadLetters, and each batch of Ops.Replay and Ops.Discard by filter:
-- the dead letters that dead_letters.sql selects (its parameters), in seq
-- order, with the error class and group key as there. waiting counts the
-- later messages of its aggregate that a dead letter holds back (through
-- outbox_messages_unsent_by_aggregate).
--
-- $6 limit (NULL for none).
SELECT s.seq, s.id, s.aggregate_type, s.aggregate_id, s.event_type, s.topic,
       s.created_at, s.dead_at, s.attempts, s.last_error, s.error_class, s.group_key,
       (SELECT count(*)
        FROM {{schema}}.outbox_messages l
        WHERE l.aggregate_type = s.aggregate_type
          AND l.aggregate_id = s.aggregate_id
          AND l.seq > s.seq
          AND l.status IN ('PENDING', 'FAILED', 'IN_FLIGHT', 'DEAD_LETTER')) AS waiting
FROM ({{dead_letters}}) s
ORDER BY s.seq
LIMIT $6::bigint

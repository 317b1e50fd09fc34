-- Ops.DeadLetter: what outbox.Record does not carry: when the message was
-- discarded, how many later messages of its aggregate are unsent (as in
-- dlq_list.sql, through outbox_messages_unsent_by_aggregate), and the
-- headers column as stored (shown when it cannot be read as headers).
--
-- $1 seq.
SELECT m.discarded_at, m.headers::text,
       (SELECT count(*)
        FROM {{schema}}.outbox_message_states(ARRAY['PENDING', 'FAILED', 'IN_FLIGHT', 'DEAD_LETTER'], false) l
        WHERE l.aggregate_type = m.aggregate_type
          AND l.aggregate_id = m.aggregate_id
          AND l.seq > m.seq)
FROM {{schema}}.outbox_message_states m
WHERE m.seq = $1

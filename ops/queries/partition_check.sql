-- Ops.MaintainPartitions: what is left in one partition that retention must
-- not drop, by the messages' states (outbox_message_states) in its range of
-- created_at, [$1, $2), which is the partition's own: the planner reads
-- that partition only. Each count and maximum is read through the index
-- that holds its state (outbox_messages_due, _dead, _discarded, _sent; for
-- the unsent messages of cursor mode, the partition's primary key from the
-- cursor's position), so it costs in proportion to what it finds, not to
-- the partition's size. The messages of cursor mode that the cursor passed
-- are SENT without a publish time: they are aged by the partition's range
-- (created_at), and do not keep it. The position only grows, so the check
-- under the lock may count as unsent a message the cursor passes
-- meanwhile, never the reverse.
--
-- {{partition}} is the partition (for its row estimate); $1 its lower
-- bound ('-infinity' for MINVALUE), $2 its upper bound.
SELECT (SELECT count(*)
        FROM {{schema}}.outbox_message_states(ARRAY['PENDING', 'FAILED', 'IN_FLIGHT']) s
        WHERE s.created_at >= $1::timestamptz AND s.created_at < $2::timestamptz),
       (SELECT count(*)
        FROM {{schema}}.outbox_message_states(ARRAY['DEAD_LETTER']) s
        WHERE s.created_at >= $1::timestamptz AND s.created_at < $2::timestamptz),
       (SELECT count(*)
        FROM {{schema}}.outbox_message_states(ARRAY['DISCARDED']) s
        WHERE s.created_at >= $1::timestamptz AND s.created_at < $2::timestamptz),
       (SELECT max(s.discarded_at)
        FROM {{schema}}.outbox_message_states(ARRAY['DISCARDED']) s
        WHERE s.created_at >= $1::timestamptz AND s.created_at < $2::timestamptz),
       (SELECT s.published_at
        FROM {{schema}}.outbox_message_states(ARRAY['SENT'], false) s
        WHERE s.created_at >= $1::timestamptz AND s.created_at < $2::timestamptz
        ORDER BY s.published_at DESC
        LIMIT 1),
       (SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = to_regclass('{{schema}}.{{partition}}'))

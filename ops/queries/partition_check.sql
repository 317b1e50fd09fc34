-- Ops.MaintainPartitions: what is left in the partition {{partition}} that
-- retention must not drop. Each count and maximum is read through one of
-- the partial indexes (outbox_messages_due, _unsent_by_aggregate, _sent,
-- _discarded), so it costs in proportion to what it finds, not to the
-- partition's size; the unsent QUEUED messages of cursor mode (above the
-- cursor's position, and in none of those indexes) through a range scan of
-- the partition's primary key (seq, created_at) from the position, which
-- is a parameter so that the planner knows the range (NULL without a
-- cursor: no QUEUED message then). QUEUED messages at or below the position
-- are SENT, and aged like the others by the partition's range (created_at):
-- they do not keep it.
--
-- $1 the cursor's position, read before the first check: it only grows,
-- so the check under the lock may count as unsent a message the cursor
-- passed meanwhile, never the reverse.
SELECT (SELECT count(*) FROM {{schema}}.{{partition}} WHERE status IN ('PENDING', 'FAILED', 'IN_FLIGHT'))
     + (SELECT count(*)
        FROM {{schema}}.{{partition}}
        WHERE seq > $1::bigint
          AND status = 'QUEUED'),
       (SELECT count(*) FROM {{schema}}.{{partition}} WHERE status = 'DEAD_LETTER'),
       (SELECT count(*) FROM {{schema}}.{{partition}} WHERE status = 'DISCARDED'),
       (SELECT max(discarded_at) FROM {{schema}}.{{partition}} WHERE status = 'DISCARDED'),
       (SELECT max(published_at) FROM {{schema}}.{{partition}} WHERE status = 'SENT'),
       (SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = to_regclass('{{schema}}.{{partition}}'))

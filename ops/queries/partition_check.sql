-- Ops.MaintainPartitions: what is left in the partition {{partition}} that
-- retention must not drop. Each count and maximum is read through one of
-- the partial indexes (outbox_messages_due, _unsent_by_aggregate, _sent,
-- _discarded), so it costs in proportion to what it finds, not to the
-- partition's size.
SELECT (SELECT count(*) FROM {{schema}}.{{partition}} WHERE status IN ('PENDING', 'FAILED', 'IN_FLIGHT')),
       (SELECT count(*) FROM {{schema}}.{{partition}} WHERE status = 'DEAD_LETTER'),
       (SELECT count(*) FROM {{schema}}.{{partition}} WHERE status = 'DISCARDED'),
       (SELECT max(discarded_at) FROM {{schema}}.{{partition}} WHERE status = 'DISCARDED'),
       (SELECT max(published_at) FROM {{schema}}.{{partition}} WHERE status = 'SENT'),
       (SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = to_regclass('{{schema}}.{{partition}}'))

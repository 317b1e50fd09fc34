-- Ops.Stats: the number of SENT messages as PostgreSQL's statistics know it:
-- the row count of the partial index outbox_messages_sent, which VACUUM and
-- ANALYZE (autovacuum) keep up to date; on a partitioned table, the sum over
-- the index's partitions. -1 when the index was never vacuumed or analyzed.
-- Costs nothing, however large the table.
--
-- $1 the schema name (unquoted; format's %I quotes it).
SELECT coalesce(
    (SELECT CASE WHEN bool_and(c.reltuples < 0) THEN -1 ELSE sum(greatest(c.reltuples, 0)) END::bigint
     FROM pg_partition_tree(to_regclass(format('%I.outbox_messages_sent', $1::text))) t
     JOIN pg_class c ON c.oid = t.relid
     WHERE t.isleaf),
    (SELECT reltuples::bigint
     FROM pg_class
     WHERE oid = to_regclass(format('%I.outbox_messages_sent', $1::text))),
    -1)

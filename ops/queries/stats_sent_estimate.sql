-- Ops.Stats: the number of SENT messages as PostgreSQL's statistics know it,
-- and how many rows the table holds as far as PostgreSQL knows now, to
-- decide whether counting exactly is cheap. Reads only the catalogs, however
-- large the table.
--
-- The first column is the row count of the partial index
-- outbox_messages_sent, which VACUUM and ANALYZE (autovacuum) keep up to
-- date; on a partitioned table, the sum over the index's partitions. -1 when
-- the index was never vacuumed or analyzed.
--
-- The second is, summed over the table's leaf partitions (the table itself
-- when it is not partitioned), the larger of the rows the last VACUUM or
-- ANALYZE counted (reltuples) and the live rows the cumulative statistics
-- count as rows are inserted and deleted (n_live_tup, which a statistics
-- reset or a crash sets back to 0): a table that grew since it was last
-- analyzed, or whose statistics were reset, is not taken for a small one.
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
    -1),
    coalesce(
    (SELECT sum(greatest(c.reltuples, 0, s.n_live_tup))::bigint
     FROM pg_class c
     LEFT JOIN pg_stat_all_tables s ON s.relid = c.oid
     WHERE (c.oid = to_regclass(format('%I.outbox_messages', $1::text)) AND c.relkind = 'r')
        OR c.oid IN (SELECT t.relid
                     FROM pg_partition_tree(to_regclass(format('%I.outbox_messages', $1::text))) t
                     WHERE t.isleaf)),
    0)

-- Ops.Stats: how many messages of cursor mode there are (outbox_message_states'
-- by_cursor), as PostgreSQL's statistics know it, for the SENT estimate in
-- cursor mode. Those messages are in none of the partial indexes, and
-- every other message is in exactly one (PENDING, FAILED, IN_FLIGHT and
-- DEAD_LETTER in outbox_messages_unsent_by_aggregate, SENT in _sent,
-- DISCARDED in _discarded), so the table's row estimate minus those
-- indexes' is their number when VACUUM or ANALYZE (autovacuum) last
-- counted. On a partitioned table each figure is the sum over the leaf
-- partitions (a leaf never counted adds 0). -1 when one of them was never
-- counted. Reads only pg_class, however large the table: the statistics
-- are of tables and indexes, which no view can stand in for.
--
-- $1 the schema name (unquoted; format's %I quotes it).
WITH rel (name, sign) AS (
    VALUES ('outbox_messages', 1),
           ('outbox_messages_unsent_by_aggregate', -1),
           ('outbox_messages_sent', -1),
           ('outbox_messages_discarded', -1)
), est AS (
    SELECT r.sign,
           coalesce(
               (SELECT CASE WHEN bool_and(c.reltuples < 0) THEN -1 ELSE sum(greatest(c.reltuples, 0)) END
                FROM pg_partition_tree(to_regclass(format('%I.%I', $1::text, r.name))) t
                JOIN pg_class c ON c.oid = t.relid
                WHERE t.isleaf),
               (SELECT c.reltuples
                FROM pg_class c
                WHERE c.oid = to_regclass(format('%I.%I', $1::text, r.name))),
               -1) AS n
    FROM rel r
)
SELECT CASE WHEN bool_or(n < 0) THEN -1 ELSE greatest(sum(sign * n), 0) END::bigint
FROM est

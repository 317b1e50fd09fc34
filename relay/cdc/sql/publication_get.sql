-- The publication's operations, whether it publishes partitions' changes
-- as their root's, whether outbox_messages is partitioned, and whether the
-- publication includes the outbox table as outbox_messages itself (for a
-- partitioned table, pg_publication_tables lists the root only with
-- publish_via_partition_root; otherwise it lists the partitions).
-- $1 publication name, $2 schema, $3 the quoted, schema-qualified name of
-- the outbox table.
SELECT p.pubinsert, p.pubupdate OR p.pubdelete OR p.pubtruncate, p.pubviaroot,
       coalesce((SELECT c.relkind = 'p' FROM pg_class c WHERE c.oid = to_regclass($3)), false),
       EXISTS (SELECT 1 FROM pg_publication_tables t
               WHERE t.pubname = p.pubname AND t.schemaname = $2 AND t.tablename = 'outbox_messages')
FROM pg_publication p
WHERE p.pubname = $1

-- Is outbox_messages partitioned (relkind 'p'), and does the settings table
-- outbox_partitioning exist?
--
-- $1 the schema name (unquoted; format's %I quotes it).
SELECT coalesce((SELECT relkind = 'p' FROM pg_class
                 WHERE oid = to_regclass(format('%I.outbox_messages', $1::text))), false),
       to_regclass(format('%I.outbox_partitioning', $1::text)) IS NOT NULL

-- The publication's operations, and whether it includes the outbox table.
-- $1 publication name, $2 schema.
SELECT p.pubinsert, p.pubupdate OR p.pubdelete OR p.pubtruncate,
       EXISTS (SELECT 1 FROM pg_publication_tables t
               WHERE t.pubname = p.pubname AND t.schemaname = $2 AND t.tablename = 'outbox_messages')
FROM pg_publication p
WHERE p.pubname = $1

-- Inbox.Migrate: serialise concurrent migrations of one schema until the
-- migrating transaction ends. $1 is a key derived from the schema name.
SELECT pg_advisory_xact_lock($1)

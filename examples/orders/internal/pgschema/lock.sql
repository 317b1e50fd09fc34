-- Apply: serialise the table creation of one service's schema until the
-- transaction ends. $1 is a key derived from the purpose and the schema.
SELECT pg_advisory_xact_lock($1)

-- Serialise the relay's setup (tables, publication, slot) of one outbox until
-- the setup transaction ends. $1 is a key derived from the schema.
SELECT pg_advisory_xact_lock($1)

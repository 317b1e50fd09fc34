-- Cursor mode's switch: take the lock that serialises Migrate for this
-- schema (the same key), until the transaction ends. $1 is a key derived
-- from the schema name.
SELECT pg_advisory_xact_lock($1)

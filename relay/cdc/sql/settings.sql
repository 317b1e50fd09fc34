-- The server settings CDC depends on, and whether the outbox table exists.
-- $1 is the quoted, schema-qualified name of the outbox table.
SELECT current_setting('wal_level'),
       current_setting('max_slot_wal_keep_size'),
       to_regclass($1) IS NOT NULL

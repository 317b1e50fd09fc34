-- Store.CheckMigrated: fails with undefined_table (or invalid_schema_name)
-- unless the tables the relay writes exist; PostgreSQL reports the first
-- missing one, outbox_messages before outbox_attempts. Reads no rows.
SELECT 1
FROM {{schema}}.outbox_messages, {{schema}}.outbox_attempts
LIMIT 0

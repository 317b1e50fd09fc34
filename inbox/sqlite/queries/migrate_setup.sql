-- SQLiteInbox.Migrate: the table recording applied migrations.
CREATE TABLE IF NOT EXISTS "{{prefix}}inbox_migrations" (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    -- unix milliseconds
    applied_at INTEGER NOT NULL DEFAULT ({{now_ms}})
) STRICT;

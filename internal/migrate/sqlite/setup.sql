-- Bookkeeping.Setup on SQLite: the table recording applied migrations.
CREATE TABLE IF NOT EXISTS {{table}} (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    -- unix milliseconds
    applied_at INTEGER NOT NULL DEFAULT (CAST(ROUND(unixepoch('now', 'subsec') * 1000) AS INTEGER))
) STRICT;

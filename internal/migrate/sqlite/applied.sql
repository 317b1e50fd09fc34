-- Bookkeeping.Applied on SQLite: the versions already applied.
SELECT version FROM {{table}} ORDER BY version

-- Bookkeeping.Applied on PostgreSQL: the versions already applied.
SELECT version FROM {{table}} ORDER BY version

-- The claim phase, after loading a table and before timing its claims:
-- write out what the load dirtied, so that the checkpoints the load's WAL
-- set off (two million UPDATEs write gigabytes of it) do not run, and
-- fsync, during the timed claims of one table and not of another. Needs
-- superuser or the pg_checkpoint role; without it the claims run beside
-- those checkpoints and the report says so.
CHECKPOINT

-- What autovacuum would do for the outbox table on a server where it is on
-- (Config.VacuumEvery): remove dead tuples and refresh the statistics.
VACUUM (ANALYZE) {{schema}}.outbox_messages

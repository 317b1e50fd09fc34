-- The server's version and the settings that shape the figures, for the
-- report.
SELECT current_setting('server_version'),
       current_setting('shared_buffers'),
       current_setting('synchronous_commit'),
       current_setting('autovacuum'),
       current_setting('max_connections')

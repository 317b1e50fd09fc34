-- Inbox.Migrate: the versions already applied.
SELECT version FROM {{schema}}.inbox_migrations ORDER BY version

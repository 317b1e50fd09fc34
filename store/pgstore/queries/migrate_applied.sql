-- Store.Migrate: the versions already applied.
SELECT version FROM {{schema}}.outbox_migrations ORDER BY version

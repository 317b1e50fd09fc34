-- SQLiteInbox.Migrate: the versions already applied.
SELECT version FROM "{{prefix}}inbox_migrations" ORDER BY version

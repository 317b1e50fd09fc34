-- Store.Migrate: the versions already applied.
SELECT version FROM "{{prefix}}migrations" ORDER BY version

-- Inbox.Migrate: record one applied migration. $1 version, $2 name.
INSERT INTO {{schema}}.inbox_migrations (version, name) VALUES ($1, $2)

-- SQLiteInbox.Migrate: record one applied migration. ?1 version, ?2 name.
INSERT INTO "{{prefix}}inbox_migrations" (version, name) VALUES (?1, ?2)

-- Store.Migrate: record one applied migration. ?1 version, ?2 name.
INSERT INTO "{{prefix}}migrations" (version, name) VALUES (?1, ?2)

-- Bookkeeping.Record on SQLite: record one applied migration. ?1 version,
-- ?2 name.
INSERT INTO {{table}} (version, name) VALUES (?1, ?2)

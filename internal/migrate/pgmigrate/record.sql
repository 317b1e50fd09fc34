-- Bookkeeping.Record on PostgreSQL: record one applied migration. $1
-- version, $2 name.
INSERT INTO {{table}} (version, name) VALUES ($1, $2)

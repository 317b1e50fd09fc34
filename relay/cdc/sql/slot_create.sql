-- A logical slot with the built-in pgoutput plugin. Returns when the slot
-- reached its consistent point, after the transactions running at the time
-- ended. $1 slot name.
SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')

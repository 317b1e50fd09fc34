-- A non-transactional logical decoding message: a WAL record the slot's
-- stream delivers at once, so that an idle outbox still moves the slot's
-- confirmed position. $1 prefix.
SELECT pg_logical_emit_message(false, $1, '')::text

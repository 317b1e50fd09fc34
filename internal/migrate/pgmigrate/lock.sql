-- Tx.Lock: take the advisory lock keyed by $1 until the transaction ends.
SELECT pg_advisory_xact_lock($1)

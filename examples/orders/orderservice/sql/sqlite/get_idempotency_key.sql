-- Service.Place: the first request of an Idempotency-Key (primary key).
SELECT request_hash, response FROM idempotency_keys WHERE key = ?1

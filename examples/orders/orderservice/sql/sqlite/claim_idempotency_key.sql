-- Service.Place: take an Idempotency-Key. Inserts nothing when the key
-- exists (primary key of idempotency_keys).
-- ?1 key, ?2 request hash, ?3 order id, ?4 response.
INSERT INTO idempotency_keys (key, request_hash, order_id, response)
VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (key) DO NOTHING

-- Service.Get: one order by primary key.
SELECT id, customer_id, amount_minor, currency, items, status, version, created_at, updated_at
FROM orders
WHERE id = ?1

-- Service.Pay/Ship/Cancel: read the order in the write transaction. SQLite
-- has no row locks (no FOR UPDATE): the transaction holds the database's
-- write lock from BEGIN (sqlitestore.Open), which serialises the order's
-- transitions and their events just the same.
SELECT id, customer_id, amount_minor, currency, items, status, version, created_at, updated_at
FROM orders
WHERE id = ?1

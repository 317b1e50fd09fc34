-- OrderPlaced: the stock of the order's SKUs (primary key), read in the
-- handler's write transaction, which holds the database's write lock (no
-- FOR UPDATE on SQLite, and no deadlock with one writer). ?1 the order's
-- items, a JSON array [{"sku": "BOOK-1", "quantity": 2}, ...].
SELECT sku, available
FROM stock
WHERE sku IN (SELECT value ->> '$.sku' FROM json_each(?1))
ORDER BY sku

-- Inventory.Migrate: stock for the configured SKUs that have none yet.
-- ?1 the stock, a JSON object {"BOOK-1": 100, ...} of SKU -> units. (WHERE
-- true lets SQLite parse ON CONFLICT after a SELECT.)
INSERT INTO stock (sku, available)
SELECT key, value FROM json_each(?1)
WHERE true
ON CONFLICT (sku) DO NOTHING

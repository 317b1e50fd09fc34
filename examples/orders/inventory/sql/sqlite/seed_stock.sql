-- Inventory.Migrate: stock for the configured SKUs that have none yet.
-- ?1 skus and ?2 quantities, JSON arrays paired by position. (WHERE true
-- lets SQLite parse ON CONFLICT after a SELECT.)
INSERT INTO stock (sku, available)
SELECT s.value, q.value
FROM json_each(?1) AS s JOIN json_each(?2) AS q ON q.key = s.key
WHERE true
ON CONFLICT (sku) DO NOTHING

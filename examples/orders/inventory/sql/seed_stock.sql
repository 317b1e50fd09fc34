-- Inventory.Migrate: stock for the configured SKUs that have none yet.
-- $1 the stock, a JSON object {"BOOK-1": 100, ...} of SKU -> units.
INSERT INTO {{schema}}.stock (sku, available)
SELECT s.key, s.value::bigint FROM jsonb_each_text($1::jsonb) AS s
ON CONFLICT (sku) DO NOTHING

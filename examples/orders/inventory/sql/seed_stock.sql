-- Inventory.Migrate: stock for the configured SKUs that have none yet.
-- $1 skus, $2 quantities.
INSERT INTO {{schema}}.stock (sku, available)
SELECT sku, available FROM unnest($1::text[], $2::bigint[]) AS s(sku, available)
ON CONFLICT (sku) DO NOTHING

-- Inventory.Stock (primary key).
SELECT available, reserved FROM {{schema}}.stock WHERE sku = $1

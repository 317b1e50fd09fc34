-- Inventory.Stock (primary key).
SELECT available, reserved FROM stock WHERE sku = ?1

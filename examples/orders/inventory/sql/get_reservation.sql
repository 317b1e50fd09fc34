-- Inventory.Reservation (primary key).
SELECT order_id, status, items, rejected, event_id, created_at, updated_at
FROM {{schema}}.reservations
WHERE order_id = $1

-- Inventory.Reservation (primary key).
SELECT order_id, status, items, rejected, event_id, created_at, updated_at
FROM reservations
WHERE order_id = ?1

-- OrderCancelled, OrderShipped: the order's reservation (primary key). No
-- FOR UPDATE on SQLite: the handler's write transaction holds the
-- database's write lock from BEGIN.
SELECT order_id, status, items, rejected, event_id, created_at, updated_at
FROM reservations
WHERE order_id = ?1

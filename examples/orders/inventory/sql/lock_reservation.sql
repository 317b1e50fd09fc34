-- OrderCancelled, OrderShipped: the order's reservation (primary key),
-- locked until the handler's transaction ends.
SELECT order_id, status, items, rejected, event_id, created_at, updated_at
FROM {{schema}}.reservations
WHERE order_id = $1
FOR UPDATE

-- OrderPaid, OrderCancelled: the order's invoice (unique order_id). SQLite
-- has no FOR UPDATE: the handler's write transaction holds the database's
-- write lock from BEGIN, so no one changes the invoice until it ends.
SELECT id, order_id, customer_id, amount_minor, currency, status, order_version, event_id, created_at, paid_at
FROM invoices
WHERE order_id = ?1

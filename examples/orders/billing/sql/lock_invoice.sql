-- OrderPaid, OrderCancelled: the order's invoice (unique order_id), locked
-- until the handler's transaction ends.
SELECT id, order_id, customer_id, amount_minor, currency, status, order_version, event_id, created_at, paid_at
FROM {{schema}}.invoices
WHERE order_id = $1
FOR UPDATE

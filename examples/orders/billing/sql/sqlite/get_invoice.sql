-- Billing.Invoice (unique order_id).
SELECT id, order_id, customer_id, amount_minor, currency, status, order_version, event_id, created_at, paid_at
FROM invoices
WHERE order_id = ?1

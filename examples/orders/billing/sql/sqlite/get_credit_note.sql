-- Billing.CreditNote (unique order_id).
SELECT id, order_id, invoice_id, amount_minor, currency, event_id, created_at
FROM credit_notes
WHERE order_id = ?1

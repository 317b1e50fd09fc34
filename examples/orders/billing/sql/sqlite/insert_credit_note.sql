-- OrderCancelled of a paid order. ?1 id, ?2 order id, ?3 invoice id,
-- ?4 amount in minor units, ?5 currency, ?6 event id.
INSERT INTO credit_notes (id, order_id, invoice_id, amount_minor, currency, event_id)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)
ON CONFLICT (order_id) DO NOTHING

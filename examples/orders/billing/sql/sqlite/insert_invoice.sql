-- OrderPlaced: the order's invoice, unless it has one (unique order_id).
-- ?1 id, ?2 order id, ?3 customer id, ?4 amount in minor units,
-- ?5 currency, ?6 order version, ?7 event id.
INSERT INTO invoices
    (id, order_id, customer_id, amount_minor, currency, status, order_version, event_id)
VALUES (?1, ?2, ?3, ?4, ?5, 'OPEN', ?6, ?7)
ON CONFLICT (order_id) DO NOTHING

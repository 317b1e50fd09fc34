-- Service.Pay/Ship/Cancel: read and lock the order until the transaction
-- ends, so that its transitions and their events are serialised: the
-- outbox's enqueue order of one order's events is their commit order.
SELECT id, customer_id, amount_minor, currency, items, status, version, created_at, updated_at
FROM {{schema}}.orders
WHERE id = $1
FOR UPDATE

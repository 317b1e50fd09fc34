-- OrderPlaced: take the order's reservation (primary key). Inserts nothing
-- when the order has one; a concurrent transaction inserting the same order
-- makes this wait for its outcome.
-- $1 order id, $2 items, $3 event id.
INSERT INTO {{schema}}.reservations (order_id, status, items, event_id)
VALUES ($1, 'RESERVED', $2, $3)
ON CONFLICT (order_id) DO NOTHING

-- OrderPlaced: take the order's reservation (primary key). Inserts nothing
-- when the order has one.
-- ?1 order id, ?2 items, ?3 event id.
INSERT INTO reservations (order_id, status, items, event_id)
VALUES (?1, 'RESERVED', ?2, ?3)
ON CONFLICT (order_id) DO NOTHING

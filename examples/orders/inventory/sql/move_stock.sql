-- Moves quantities between available and reserved: reserve with signs
-- (-1, +1), release with (+1, -1), ship with (0, -1).
-- $1 the items, a JSON array [{"sku": "BOOK-1", "quantity": 2}, ...],
-- $2 sign for available, $3 sign for reserved.
UPDATE {{schema}}.stock s
SET available = s.available + $2::int * r.quantity,
    reserved  = s.reserved + $3::int * r.quantity
FROM jsonb_to_recordset($1::jsonb) AS r(sku text, quantity bigint)
WHERE s.sku = r.sku

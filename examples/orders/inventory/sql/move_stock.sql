-- Moves quantities between available and reserved: reserve with signs
-- (-1, +1), release with (+1, -1), ship with (0, -1).
-- $1 skus, $2 quantities, $3 sign for available, $4 sign for reserved.
UPDATE {{schema}}.stock s
SET available = s.available + $3::int * r.quantity,
    reserved  = s.reserved + $4::int * r.quantity
FROM unnest($1::text[], $2::bigint[]) AS r(sku, quantity)
WHERE s.sku = r.sku

-- Moves quantities between available and reserved: reserve with signs
-- (-1, +1), release with (+1, -1), ship with (0, -1).
-- ?1 the items, a JSON array [{"sku": "BOOK-1", "quantity": 2}, ...],
-- ?2 sign for available, ?3 sign for reserved.
UPDATE stock
SET available = stock.available + ?2 * r.quantity,
    reserved  = stock.reserved + ?3 * r.quantity
FROM (SELECT value ->> '$.sku' AS sku, value ->> '$.quantity' AS quantity FROM json_each(?1)) AS r
WHERE stock.sku = r.sku

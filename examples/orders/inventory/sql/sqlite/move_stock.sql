-- Moves quantities between available and reserved: reserve with signs
-- (-1, +1), release with (+1, -1), ship with (0, -1).
-- ?1 skus and ?2 quantities, JSON arrays of the same length (paired by
-- position), ?3 sign for available, ?4 sign for reserved.
UPDATE stock
SET available = stock.available + ?3 * r.quantity,
    reserved  = stock.reserved + ?4 * r.quantity
FROM (SELECT s.value AS sku, q.value AS quantity
      FROM json_each(?1) AS s JOIN json_each(?2) AS q ON q.key = s.key) AS r
WHERE stock.sku = r.sku

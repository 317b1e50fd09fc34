-- OrderPlaced: the stock of the order's SKUs (primary key), locked in SKU
-- order, so that concurrent reservations cannot deadlock. $1 the order's
-- items, a JSON array [{"sku": "BOOK-1", "quantity": 2}, ...].
SELECT sku, available
FROM {{schema}}.stock
WHERE sku IN (SELECT i.sku FROM jsonb_to_recordset($1::jsonb) AS i(sku text))
ORDER BY sku
FOR UPDATE

-- OrderPlaced: the stock of the order's SKUs (primary key), locked in SKU
-- order, so that concurrent reservations cannot deadlock. $1 skus.
SELECT sku, available
FROM {{schema}}.stock
WHERE sku = ANY ($1::text[])
ORDER BY sku
FOR UPDATE

-- Service.Place.
INSERT INTO orders
    (id, customer_id, amount_minor, currency, items, status, version, created_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)

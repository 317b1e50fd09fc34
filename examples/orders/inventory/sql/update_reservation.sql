-- $1 order id, $2 status, $3 rejected lines.
UPDATE {{schema}}.reservations
SET status = $2, rejected = $3, updated_at = now()
WHERE order_id = $1

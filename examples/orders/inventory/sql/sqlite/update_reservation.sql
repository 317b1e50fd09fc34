-- ?1 order id, ?2 status, ?3 rejected lines.
UPDATE reservations
SET status = ?2, rejected = ?3, updated_at = strftime('%Y-%m-%d %H:%M:%f', 'now')
WHERE order_id = ?1

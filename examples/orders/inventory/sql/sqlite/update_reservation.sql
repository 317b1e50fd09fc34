-- ?1 order id, ?2 status, ?3 rejected lines.
UPDATE reservations
SET status = ?2, rejected = ?3, updated_at = CAST(unixepoch('now', 'subsec') * 1000000 AS INTEGER)
WHERE order_id = ?1

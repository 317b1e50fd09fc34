-- Service.Pay/Ship/Cancel, on the row lock_order.sql read.
-- ?1 id, ?2 status, ?3 version, ?4 updated at.
UPDATE orders SET status = ?2, version = ?3, updated_at = ?4 WHERE id = ?1

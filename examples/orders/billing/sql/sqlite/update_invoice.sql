-- ?1 invoice id, ?2 status, ?3 order version, ?4 paid at (NULL keeps it).
UPDATE invoices
SET status = ?2, order_version = ?3, paid_at = coalesce(?4, paid_at)
WHERE id = ?1

-- Cursor mode: a leader that stops saves its position (and what it handled
-- above it, as cursor_save.sql does) and gives up its lease, so that a
-- standby takes over at once instead of after the lease.
--
-- $1 lease token, $2 position, $3 head, $4 and $5 the unhandled ranges'
-- lowest and highest seqs.
UPDATE {{schema}}.outbox_cursor
SET position = greatest(position, $2),
    lease_owner = NULL,
    lease_token = NULL,
    lease_expires_at = NULL,
    saved_at = now(),
    handled_head = coalesce($3::bigint, handled_head),
    unhandled_lo = CASE WHEN $3::bigint IS NULL THEN unhandled_lo ELSE $4::bigint[] END,
    unhandled_hi = CASE WHEN $3::bigint IS NULL THEN unhandled_hi ELSE $5::bigint[] END
WHERE lease_token = $1

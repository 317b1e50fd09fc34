-- Cursor mode: the leader saves its position and renews its lease, fenced
-- by its lease token: no row changes for a relay whose lease another one
-- took over. The row lock it takes lasts until the round trip's
-- transaction commits, so the statements after it in the same round trip
-- (cursor_table.sql, cursor_failed.sql) run while the lease is certainly
-- this relay's.
--
-- With the position it saves what it handled above it (migration 011): its
-- head and the ranges at or below it that it has not handled. A NULL head
-- keeps what was saved before, which stays true.
--
-- $1 lease token, $2 position, $3 lease in milliseconds, $4 head,
-- $5 and $6 the unhandled ranges' lowest and highest seqs.
UPDATE {{schema}}.outbox_cursor
SET position = greatest(position, $2),
    lease_expires_at = now() + $3::bigint * interval '1 millisecond',
    saved_at = now(),
    handled_head = coalesce($4::bigint, handled_head),
    unhandled_lo = CASE WHEN $4::bigint IS NULL THEN unhandled_lo ELSE $5::bigint[] END,
    unhandled_hi = CASE WHEN $4::bigint IS NULL THEN unhandled_hi ELSE $6::bigint[] END
WHERE lease_token = $1
  AND active

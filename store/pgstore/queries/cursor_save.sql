-- Cursor mode: the leader saves its position and renews its lease, fenced
-- by its lease token: no row changes for a relay whose lease another one
-- took over. The row lock it takes lasts until the round trip's
-- transaction commits, so the statements after it in the same round trip
-- (cursor_table.sql, cursor_failed.sql) run while the lease is certainly
-- this relay's.
--
-- $1 lease token, $2 position, $3 lease in milliseconds.
UPDATE {{schema}}.outbox_cursor
SET position = greatest(position, $2),
    lease_expires_at = now() + $3::bigint * interval '1 millisecond',
    saved_at = now()
WHERE lease_token = $1
  AND active

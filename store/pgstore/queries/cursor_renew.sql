-- Cursor mode: the leader renews its lease (relay/cursor/lease.go, every third of
-- Config.LeaderLease while the cursor strategy leads), fenced by its
-- lease token: no row changes for a relay whose lease another one took
-- over, which then knows it leads no more.
--
-- $1 lease token, $2 lease in milliseconds.
UPDATE {{schema}}.outbox_cursor
SET lease_expires_at = now() + $2::bigint * interval '1 millisecond'
WHERE lease_token = $1
  AND active

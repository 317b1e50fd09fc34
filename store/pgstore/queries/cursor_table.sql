-- Cursor mode: QUEUED messages move to the table path (PENDING, due now),
-- because an earlier message of their aggregate is there: the claim of
-- queries/claim.sql takes them in order after it. Only while the lease is
-- the leader's (cursor_save.sql runs first in the same transaction and
-- holds the cursor row). The result lists what is not QUEUED any more, so
-- that the leader can forget it.
--
-- $1 lease token, $2 seqs.
WITH moved AS (
    UPDATE {{schema}}.outbox_messages m
    SET status = 'PENDING',
        next_attempt_at = now()
    WHERE m.seq = ANY ($2::bigint[])
      AND m.status = 'QUEUED'
      AND EXISTS (SELECT 1 FROM {{schema}}.outbox_cursor c WHERE c.lease_token = $1)
    RETURNING m.seq
)
SELECT count(*) FROM moved

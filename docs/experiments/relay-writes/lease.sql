-- Claim mode today, simplified: lease up to 100 due rows from the floor (an
-- UPDATE of the lease columns, which no index names, so in place where the
-- page has room). Sets :seqs and :floor for the statement after it.
WITH due AS (
    SELECT seq FROM outbox_messages
    WHERE status IN ('PENDING', 'FAILED', 'IN_FLIGHT') AND seq >= :floor
      AND ((status IN ('PENDING', 'FAILED') AND next_attempt_at <= now())
           OR (status = 'IN_FLIGHT' AND lease_expires_at <= now()))
    ORDER BY seq LIMIT 100
    FOR UPDATE SKIP LOCKED
), c AS (
    UPDATE outbox_messages m
    SET next_attempt_at = now() + interval '30 s', lease_owner = 'relay',
        lease_token = '00000000-0000-0000-0000-000000000001', lease_expires_at = now() + interval '30 s'
    WHERE m.seq = ANY (ARRAY(SELECT seq FROM due))
    RETURNING m.seq, m.payload
)
SELECT quote_literal(coalesce(array_agg(seq), ARRAY[]::bigint[])::text) AS seqs,
       coalesce(max(seq) + 1, :floor) AS floor, sum(length(payload)) AS bytes
FROM c
\gset

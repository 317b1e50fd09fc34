-- No lease: lock up to 100 due rows from the floor; the transaction around
-- it (run.sh) holds the locks until the mark or delete after it commits.
SELECT quote_literal(coalesce(array_agg(seq), ARRAY[]::bigint[])::text) AS seqs,
       coalesce(max(seq) + 1, :floor) AS floor, sum(length(payload)) AS bytes
FROM (
    SELECT seq, payload FROM outbox_messages
    WHERE status IN ('PENDING', 'FAILED', 'IN_FLIGHT') AND seq >= :floor
      AND ((status IN ('PENDING', 'FAILED') AND next_attempt_at <= now())
           OR (status = 'IN_FLIGHT' AND lease_expires_at <= now()))
    ORDER BY seq LIMIT 100
    FOR UPDATE SKIP LOCKED
) s
\gset

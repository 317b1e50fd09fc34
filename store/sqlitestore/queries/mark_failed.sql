-- Store.MarkFailed: one statement for all failures, which arrive as one JSON
-- array of objects (the counterpart of PostgreSQL's unnest). Fenced like
-- mark_sent.sql. Finds rows by primary key (seq). The seqs are distinct.
--
-- ?1 lease token, ?2 failures: [{"seq", "error", "delay_ms", "count", "dead"}].
UPDATE "{{prefix}}messages" AS m
SET attempts = m.attempts + f.count_attempt,
    status = CASE WHEN f.dead THEN 'DEAD_LETTER' ELSE 'FAILED' END,
    next_attempt_at = {{now_ms}} + f.delay_ms,
    last_error = f.error,
    lease_owner = NULL,
    lease_token = NULL,
    lease_expires_at = NULL
FROM (
    SELECT value ->> '$.seq'      AS seq,
           value ->> '$.error'    AS error,
           value ->> '$.delay_ms' AS delay_ms,
           value ->> '$.count'    AS count_attempt,
           value ->> '$.dead'     AS dead
    FROM json_each(?2)
) AS f
WHERE m.seq = f.seq
  AND m.lease_token = ?1
  AND m.status = 'IN_FLIGHT'

-- Store.MarkFailed: one statement and one round trip for all failures,
-- zipped by unnest. Finds rows by primary key (seq). A claimed message is
-- fenced like mark_sent.sql: it changes only while leased (IN_FLIGHT) under
-- the caller's lease token. In cursor mode (package relay/cursor) a failed QUEUED message
-- enters the table path the same way, while the cursor's lease is the
-- leader's ($7; cursor_save.sql, earlier in the same transaction, holds the
-- cursor row). The second CTE records each counted attempt (and each move
-- to DEAD_LETTER) in outbox_attempts, for rows the fence let through only;
-- the result is the number of messages changed.
--
-- $1 lease token, $2 seqs, $3 errors, $4 delays in milliseconds,
-- $5 count the attempt, $6 dead letter, $7 a QUEUED message of the cursor
-- (else a claimed one), $8 the cursor's lease token (NULL when not leading
-- a cursor).
WITH failed AS (
    UPDATE {{schema}}.outbox_messages m
    SET attempts = m.attempts + CASE WHEN f.count_attempt THEN 1 ELSE 0 END,
        status = CASE WHEN f.dead THEN 'DEAD_LETTER' ELSE 'FAILED' END,
        next_attempt_at = now() + f.delay_ms * interval '1 millisecond',
        last_error = f.error,
        lease_owner = NULL,
        lease_token = NULL,
        lease_expires_at = NULL
    FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::bool[], $6::bool[], $7::bool[])
        AS f (seq, error, delay_ms, count_attempt, dead, queued)
    WHERE m.seq = f.seq
      AND (   (NOT f.queued AND m.status IN ('PENDING', 'FAILED', 'IN_FLIGHT') AND m.lease_token = $1)
           OR (f.queued AND m.status = 'QUEUED'
               AND EXISTS (SELECT 1 FROM {{schema}}.outbox_cursor c WHERE c.lease_token = $8::uuid)))
    RETURNING m.seq, m.id, m.attempts, f.error, f.count_attempt, f.dead
), recorded AS (
    INSERT INTO {{schema}}.outbox_attempts (seq, message_id, attempt, error, dead)
    SELECT seq, id, attempts, error, dead
    FROM failed
    WHERE count_attempt OR dead
)
SELECT count(*) FROM failed

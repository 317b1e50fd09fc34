-- Store.MarkFailed: one statement and one round trip for all failures,
-- zipped by unnest. Fenced like mark_sent.sql. Finds rows by primary key
-- (seq). The second CTE records each counted attempt (and each move to
-- DEAD_LETTER) in outbox_attempts, for rows the fence let through only; the
-- result is the number of messages changed.
--
-- $1 lease token, $2 seqs, $3 errors, $4 delays in milliseconds,
-- $5 count the attempt, $6 dead letter.
WITH failed AS (
    UPDATE {{schema}}.outbox_messages m
    SET attempts = m.attempts + CASE WHEN f.count_attempt THEN 1 ELSE 0 END,
        status = CASE WHEN f.dead THEN 'DEAD_LETTER' ELSE 'FAILED' END,
        next_attempt_at = now() + f.delay_ms * interval '1 millisecond',
        last_error = f.error,
        lease_owner = NULL,
        lease_token = NULL,
        lease_expires_at = NULL
    FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::bool[], $6::bool[])
        AS f (seq, error, delay_ms, count_attempt, dead)
    WHERE m.seq = f.seq
      AND m.lease_token = $1
      AND m.status = 'IN_FLIGHT'
    RETURNING m.seq, m.id, m.attempts, f.error, f.count_attempt, f.dead
), recorded AS (
    INSERT INTO {{schema}}.outbox_attempts (seq, message_id, attempt, error, dead)
    SELECT seq, id, attempts, error, dead
    FROM failed
    WHERE count_attempt OR dead
)
SELECT count(*) FROM failed

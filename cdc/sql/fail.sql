-- A failed publish from the stream, recorded as the polling relay records
-- it: FAILED with the next attempt scheduled, or DEAD_LETTER. Only rows still
-- PENDING change (the stream never leased them). Finds rows by primary key.
--
-- $1 seqs, $2 errors, $3 delays in milliseconds, $4 dead letter.
UPDATE {{schema}}.outbox_messages m
SET attempts = m.attempts + 1,
    status = CASE WHEN f.dead THEN 'DEAD_LETTER' ELSE 'FAILED' END,
    next_attempt_at = now() + f.delay_ms * interval '1 millisecond',
    last_error = f.error
FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::bool[]) AS f (seq, error, delay_ms, dead)
WHERE m.seq = f.seq
  AND m.status = 'PENDING'

-- Ops.Cleanup with IncludeDiscarded: like cleanup_sent.sql, for DISCARDED
-- messages discarded before the cutoff, through the partial index
-- outbox_messages_discarded. DISCARDED is final too.
--
-- $1 cutoff, $2 discarded at or after, $3 batch size.
WITH batch AS (
    SELECT s.seq
    FROM {{schema}}.outbox_message_states(ARRAY['DISCARDED']) s
    WHERE s.discarded_at < $1::timestamptz
      AND s.discarded_at >= $2::timestamptz
    ORDER BY s.discarded_at
    LIMIT $3
), doomed AS (
    SELECT m.seq
    FROM {{schema}}.outbox_messages m
    WHERE m.seq = ANY (ARRAY(SELECT b.seq FROM batch b))
    FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM {{schema}}.outbox_messages m
    USING doomed
    WHERE m.seq = doomed.seq
      AND m.status = 'DISCARDED'
    RETURNING m.seq, m.discarded_at
), history AS (
    DELETE FROM {{schema}}.outbox_attempts a
    USING gone
    WHERE a.seq = gone.seq
)
SELECT count(*), max(discarded_at)
FROM gone

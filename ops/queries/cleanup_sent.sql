-- Ops.Cleanup: deletes one bounded batch of SENT messages that claims
-- marked (outbox_message_states: SENT, not by_cursor), published before the
-- cutoff, oldest first, with their attempt history, in one autocommit
-- statement. The batch is a range scan of the partial index
-- outbox_messages_sent; $2, the newest published_at of the previous batch,
-- lets it start where the previous batch ended instead of stepping over
-- the index entries it just deleted. It locks only the rows it deletes
-- (SKIP LOCKED passes over any that another transaction holds), by primary
-- key, and never touches another state, so the relay is not blocked. SENT
-- is final: nothing changes such a row but its deletion, and the DELETE
-- checks the status of the row it locked once more.
--
-- $1 cutoff, $2 published at or after, $3 batch size.
WITH batch AS (
    SELECT s.seq
    FROM {{schema}}.outbox_message_states(ARRAY['SENT'], false) s
    WHERE s.published_at < $1::timestamptz
      AND s.published_at >= $2::timestamptz
    ORDER BY s.published_at
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
      AND m.status = 'SENT'
    RETURNING m.seq, m.published_at
), history AS (
    DELETE FROM {{schema}}.outbox_attempts a
    USING gone
    WHERE a.seq = gone.seq
)
SELECT count(*), max(published_at)
FROM gone

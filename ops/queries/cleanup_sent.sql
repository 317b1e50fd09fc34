-- Ops.Cleanup: deletes one bounded batch of SENT messages published before
-- the cutoff, oldest first, with their attempt history, in one autocommit
-- statement. It locks only the rows it deletes (SKIP LOCKED passes over any
-- that another transaction holds) and never touches another status, so the
-- relay is not blocked. The inner scan is a range scan of the partial index
-- outbox_messages_sent; $2, the newest published_at of the previous batch,
-- lets it start where the previous batch ended instead of stepping over the
-- index entries it just deleted.
--
-- $1 cutoff, $2 published at or after, $3 batch size.
WITH doomed AS (
    SELECT seq
    FROM {{schema}}.outbox_messages
    WHERE status = 'SENT'
      AND published_at < $1::timestamptz
      AND published_at >= $2::timestamptz
    ORDER BY published_at
    LIMIT $3
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

-- Ops.Cleanup in cursor mode: deletes the messages of cursor mode that the
-- cursor passed (outbox_message_states: SENT, by_cursor) and that were
-- created before the cutoff, with their attempt history, in one autocommit
-- statement. They have no published_at, so they are aged by created_at (a
-- message is sent after it is created).
--
-- No partial index holds them, so the statement walks the primary key
-- (seq) from the low end in bounded steps: "scanned" is the next $3
-- messages after $2 at or below the cursor's position
-- (outbox_cursor_position(), NULL without a cursor: then nothing), in any
-- state, one range scan of the primary key bounded by both. Messages are
-- created in seq order, so the first one created at or after the cutoff
-- ("edge") marks where the retained history starts: the caller stops
-- there, and never walks the retained history or anything above the
-- position. Of the scanned messages before the edge, those of cursor mode
-- that are SENT are locked (SKIP LOCKED passes over any that another
-- transaction holds) and deleted. Such a message is final: the relay never
-- changes a message the cursor passed, and the position only grows, so
-- neither waits for the other and what the scan saw is what is deleted.
--
-- $1 cutoff, $2 after seq (the last seq scanned by the previous step),
-- $3 how many messages to scan. Returns the messages deleted, the messages
-- scanned, the last seq scanned, and whether the step reached the edge.
WITH scanned AS (
    SELECT s.seq, s.state, s.by_cursor, s.created_at
    FROM {{schema}}.outbox_message_states s
    WHERE s.seq > $2::bigint
      AND s.seq <= {{schema}}.outbox_cursor_position()
    ORDER BY s.seq
    LIMIT $3
), edge AS (
    SELECT min(s.seq) AS seq FROM scanned s WHERE s.created_at >= $1::timestamptz
), doomed AS (
    SELECT m.seq
    FROM {{schema}}.outbox_messages m
    WHERE m.seq = ANY (ARRAY(SELECT s.seq
                             FROM scanned s, edge
                             WHERE s.state = 'SENT'
                               AND s.by_cursor
                               AND s.created_at < $1::timestamptz
                               AND (edge.seq IS NULL OR s.seq < edge.seq)))
    FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM {{schema}}.outbox_messages m
    USING doomed
    WHERE m.seq = doomed.seq
    RETURNING m.seq
), history AS (
    DELETE FROM {{schema}}.outbox_attempts a
    USING gone
    WHERE a.seq = gone.seq
)
SELECT (SELECT count(*) FROM gone),
       (SELECT count(*) FROM scanned),
       (SELECT max(s.seq) FROM scanned s),
       (SELECT e.seq IS NOT NULL FROM edge e)

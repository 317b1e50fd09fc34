-- Ops.Cleanup in cursor mode: deletes the QUEUED messages the cursor passed
-- (they are SENT) that were created before the cutoff, with their attempt
-- history, in one autocommit statement. They have no published_at, so they
-- are aged by created_at (a message is sent after it is created).
--
-- QUEUED rows are in none of the partial indexes, so the statement walks
-- the primary key (seq) from the low end in bounded steps: "scanned" is the
-- next $3 rows after $2 at or below the position, whatever their status
-- (no lock), one range scan of the primary key bounded by both. Rows are created in seq order, so the first one created at or
-- after the cutoff ("edge") marks where the retained history starts: the
-- caller stops there, and never walks the retained history or anything
-- above the position. Of the scanned rows before the edge, the QUEUED ones
-- are locked (SKIP LOCKED passes over any that another transaction holds)
-- and deleted; the DELETE checks again that they are QUEUED and at or below
-- the position. Rows of other statuses are left alone, and the relay never
-- changes a QUEUED row the cursor passed, so neither waits for the other.
--
-- $1 cutoff, $2 after seq (the last seq scanned by the previous step),
-- $3 how many rows to scan. Returns the rows deleted, the rows scanned,
-- the last seq scanned, and whether the step reached the edge.
WITH scanned AS (
    SELECT m.seq, m.status, m.created_at
    FROM {{schema}}.outbox_messages m
    WHERE m.seq > $2::bigint
      AND m.seq <= (SELECT c.position FROM {{schema}}.outbox_cursor c)
    ORDER BY m.seq
    LIMIT $3
), edge AS (
    SELECT min(s.seq) AS seq FROM scanned s WHERE s.created_at >= $1::timestamptz
), doomed AS (
    SELECT m.seq
    FROM {{schema}}.outbox_messages m
    WHERE m.seq IN (SELECT s.seq
                    FROM scanned s, edge
                    WHERE s.status = 'QUEUED'
                      AND s.created_at < $1::timestamptz
                      AND (edge.seq IS NULL OR s.seq < edge.seq))
    FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM {{schema}}.outbox_messages m
    USING doomed
    WHERE m.seq = doomed.seq
      AND m.status = 'QUEUED'
      AND m.seq <= (SELECT c.position FROM {{schema}}.outbox_cursor c)
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

-- Ops.Cleanup: deletes one bounded batch of messages in a final state,
-- with their attempt history, oldest first, in one autocommit statement:
-- SENT messages that claims marked (outbox_message_states: SENT, not
-- by_cursor), published before the cutoff, and, with IncludeDiscarded,
-- DISCARDED messages discarded before it. cleanup.go renders it once for
-- each: the placeholder status is the state, at its time column
-- (published_at, discarded_at), and cursor the rest of
-- outbox_message_states's arguments (", false" for SENT: not by_cursor).
--
-- The batch is a range scan of the state's partial index
-- (outbox_messages_sent, outbox_messages_discarded); $2, the newest time
-- of the previous batch, lets it start where the previous batch ended
-- instead of stepping over the index entries it just deleted. It locks
-- only the rows it deletes (SKIP LOCKED passes over any that another
-- transaction holds), by primary key, and never touches another state, so
-- the relay is not blocked. SENT and DISCARDED are final: nothing changes
-- such a row but its deletion, and the DELETE checks the status of the row
-- it locked once more.
--
-- $1 cutoff, $2 the time at or after which to delete, $3 batch size.
WITH batch AS (
    SELECT s.seq
    FROM {{schema}}.outbox_message_states(ARRAY['{{status}}']{{cursor}}) s
    WHERE s.{{at}} < $1::timestamptz
      AND s.{{at}} >= $2::timestamptz
    ORDER BY s.{{at}}
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
      AND m.status = '{{status}}'
    RETURNING m.seq, m.{{at}}
), history AS (
    DELETE FROM {{schema}}.outbox_attempts a
    USING gone
    WHERE a.seq = gone.seq
)
SELECT count(*), max({{at}})
FROM gone

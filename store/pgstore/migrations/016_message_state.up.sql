-- One definition of a message's state: what it is for an operator, its
-- publisher and its readers (ops, the status page, Store.Get and
-- Store.Counts), whatever the relay mode stored.
--
-- The relay keeps its hot path cheap by storing less than the state:
--   - a claim leases a PENDING or FAILED row without changing its status
--     (lease_token set; rows leased by earlier versions are IN_FLIGHT);
--   - in cursor mode a message is stored QUEUED and its row is not changed
--     when it is published: the cursor's position (outbox_cursor) says
--     whether it was.
-- outbox_message_states resolves both, once, for every reader:
--
--   stored                                      state
--   PENDING or FAILED with a lease token, or    IN_FLIGHT
--     IN_FLIGHT
--   PENDING, FAILED, SENT, DEAD_LETTER,         the same
--     DISCARDED (without a lease token)
--   QUEUED with seq <= the cursor's position    SENT
--   QUEUED above the position                   PENDING
--
-- An IN_FLIGHT message stays IN_FLIGHT after its lease expired, as
-- Store.Get, "outbox stats" and the store contract (package store) have it:
-- until another claim takes it over (and the next claim does: it is due),
-- its relay may still mark it, since marks are fenced by the lease token
-- and not by the clock. lease_expires_at in the past tells such a message
-- apart: its relay stopped, or is slow.
--
-- A QUEUED row exists only once cursor mode was turned on, which creates
-- the cursor row in the same transaction; the row is never deleted (it
-- stays, inactive, after DisableCursor, so that the QUEUED messages at or
-- below its position stay SENT).
--
-- The table is named in the function bodies, not bound by a view's
-- dependency, so that they read whatever outbox_messages is when a query
-- is planned: Store.Migrate with Config.Partitioning replaces the plain
-- table with a partitioned one (partition.go), and the functions read the
-- new table without being recreated.

-- The cursor's saved position: every QUEUED message with a seq at or below
-- it is SENT. NULL before cursor mode was first turned on. STABLE, so that
-- the planner evaluates it when it estimates a range such as
-- seq > outbox_cursor_position() and plans a range scan of the primary key
-- from the position, where a subquery's value would be unknown to it; an
-- index condition evaluates it once per scan. PL/pgSQL, whose plan is kept
-- for the session, rather than SQL, which is planned again at each place
-- that calls it: on a partitioned table every partition's scan calls it.
CREATE FUNCTION {{schema}}.outbox_cursor_position() RETURNS bigint
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
    RETURN (SELECT c.position FROM {{schema}}.outbox_cursor c);
END
$$;

COMMENT ON FUNCTION {{schema}}.outbox_cursor_position() IS
    'The saved position of cursor mode''s cursor: QUEUED messages at or below it are SENT, above it PENDING. NULL before cursor mode was first turned on.';

-- The cursor of cursor mode as ops reads it: at most one row, none before
-- cursor mode was first turned on. leading_now: a relay holds its lease now.
-- handled_head and unhandled_ranges: what the leader handled above the
-- position at its last save (migration 011).
CREATE FUNCTION {{schema}}.outbox_cursor_state()
RETURNS TABLE (active boolean, "position" bigint, lease_owner text, lease_expires_at timestamptz,
               leading_now boolean, saved_at timestamptz, enabled_at timestamptz,
               handled_head bigint, unhandled_ranges int)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT c.active, c.position, c.lease_owner, c.lease_expires_at,
           coalesce(c.lease_expires_at > now(), false),
           c.saved_at, c.enabled_at, c.handled_head,
           coalesce(cardinality(c.unhandled_lo), 0)
    FROM {{schema}}.outbox_cursor c
$$;

COMMENT ON FUNCTION {{schema}}.outbox_cursor_state() IS
    'The cursor of cursor mode: whether it is on (active), its saved position, its leading relay and lease, when it was saved and enabled, and what the leader handled above the position. No row before cursor mode was first turned on.';

-- Every message with its state (the table above), or, given states, only
-- the messages in one of them, read through the indexes that hold them:
--
--   PENDING, FAILED, IN_FLIGHT  outbox_messages_due
--   DEAD_LETTER                 outbox_messages_dead (with any of the three
--                               above: outbox_messages_unsent_by_aggregate,
--                               which holds them all)
--   SENT                        outbox_messages_sent (by published_at), and
--                               in cursor mode the primary key up to the
--                               position
--   DISCARDED                   outbox_messages_discarded
--   PENDING in cursor mode      the primary key above the position
--
-- by_cursor is true for a message of cursor mode (stored QUEUED: the
-- cursor, not a claim, publishes it, and it has no published_at); the
-- argument cursor keeps only those (true) or only the others (false);
-- NULL keeps both.
--
-- The function is inlined into the calling query (a single SELECT in SQL,
-- STABLE, not STRICT), with states and cursor as constants when the caller
-- writes them as literals: each OR arm below whose state or path is not
-- asked for folds away when the query is planned, and what remains is a
-- scan of the indexes above, in their order, so that ORDER BY seq LIMIT n
-- reads n rows of outbox_messages_dead, not every dead letter. The arms
-- say where the rows of each state are stored; the state itself is
-- computed once, in the LATERAL subquery, and the arms of PENDING, FAILED
-- and IN_FLIGHT keep the rows whose computed state was asked for.
CREATE FUNCTION {{schema}}.outbox_message_states(states text[] DEFAULT NULL, "cursor" boolean DEFAULT NULL)
RETURNS TABLE (seq bigint, id uuid, aggregate_type text, aggregate_id text, event_type text,
               event_version int, topic text, payload bytea, content_type text, headers jsonb,
               correlation_id text, causation_id text, traceparent text, created_at timestamptz,
               state text, by_cursor boolean, attempts int, next_attempt_at timestamptz,
               last_error text, lease_owner text, lease_expires_at timestamptz,
               published_at timestamptz, discarded_at timestamptz)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT m.seq, m.id, m.aggregate_type, m.aggregate_id, m.event_type,
           m.event_version, m.topic, m.payload, m.content_type, m.headers,
           m.correlation_id, m.causation_id, m.traceparent, m.created_at,
           s.state, m.status = 'QUEUED', m.attempts, m.next_attempt_at,
           m.last_error, m.lease_owner, m.lease_expires_at,
           m.published_at, m.discarded_at
    FROM {{schema}}.outbox_messages m
    CROSS JOIN LATERAL (
        SELECT CASE WHEN m.status IN ('PENDING', 'FAILED') AND m.lease_token IS NOT NULL THEN 'IN_FLIGHT'
                    WHEN m.status <> 'QUEUED' THEN m.status
                    -- One read of the position per query, not per row.
                    WHEN m.seq <= (SELECT {{schema}}.outbox_cursor_position()) THEN 'SENT'
                    ELSE 'PENDING' END AS state
    ) s
    WHERE ($1 IS NULL AND $2 IS NULL)
       -- PENDING, FAILED or IN_FLIGHT, and DEAD_LETTER: one scan of
       -- outbox_messages_unsent_by_aggregate, which holds them all (the
       -- backlog, and whether an aggregate has an earlier unsent message).
       OR ($2 IS NOT TRUE
           AND ($1 IS NULL OR ($1 && ARRAY['PENDING', 'FAILED', 'IN_FLIGHT'] AND 'DEAD_LETTER' = ANY ($1)))
           AND m.status IN ('PENDING', 'FAILED', 'IN_FLIGHT', 'DEAD_LETTER')
           AND ($1 IS NULL OR s.state = ANY ($1)))
       -- PENDING, FAILED or IN_FLIGHT without DEAD_LETTER.
       OR ($2 IS NOT TRUE
           AND $1 && ARRAY['PENDING', 'FAILED', 'IN_FLIGHT'] AND NOT 'DEAD_LETTER' = ANY ($1)
           AND m.status IN ('PENDING', 'FAILED', 'IN_FLIGHT')
           AND s.state = ANY ($1))
       -- DEAD_LETTER without the others: outbox_messages_dead.
       OR ($2 IS NOT TRUE
           AND 'DEAD_LETTER' = ANY ($1) AND NOT $1 && ARRAY['PENDING', 'FAILED', 'IN_FLIGHT']
           AND m.status = 'DEAD_LETTER')
       OR ($2 IS NOT TRUE AND m.status = 'SENT' AND ($1 IS NULL OR 'SENT' = ANY ($1)))
       OR ($2 IS NOT TRUE AND m.status = 'DISCARDED' AND ($1 IS NULL OR 'DISCARDED' = ANY ($1)))
       OR ($2 IS NOT FALSE AND m.status = 'QUEUED'
           AND m.seq <= {{schema}}.outbox_cursor_position()
           AND ($1 IS NULL OR 'SENT' = ANY ($1)))
       OR ($2 IS NOT FALSE AND m.status = 'QUEUED'
           AND m.seq > {{schema}}.outbox_cursor_position()
           AND ($1 IS NULL OR 'PENDING' = ANY ($1)))
$$;

COMMENT ON FUNCTION {{schema}}.outbox_message_states(text[], boolean) IS
    'The messages in the given states (NULL: all), each with its state, read through the indexes that hold them; cursor true keeps only cursor mode''s messages, false the others. See the view outbox_message_states.';

CREATE VIEW {{schema}}.outbox_message_states AS
SELECT * FROM {{schema}}.outbox_message_states();

COMMENT ON VIEW {{schema}}.outbox_message_states IS
    'Every message with its state: PENDING, IN_FLIGHT, FAILED, SENT, DEAD_LETTER or DISCARDED. IN_FLIGHT: leased by a relay (a PENDING or FAILED row with a lease token), also once the lease expired (lease_expires_at in the past), until another relay claims it. Cursor mode''s QUEUED rows are SENT at or below the cursor''s position and PENDING above it (by_cursor is true for them). A filter on state reads the whole table: to read only some states through their indexes, call outbox_message_states(ARRAY[...]).';

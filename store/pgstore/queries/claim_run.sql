-- Store.Claim of runs, for ClaimParams.MaxRun above 1: one autocommit
-- statement, as claim.sql. It leases the heads claim.sql leases
-- (claim_heads.sql) and, after each head, its followers: together a run,
-- consecutive messages of one aggregate under one lease token.
--
-- $1 to $8 as in claim.sql; $9 MaxRun, the most messages of a run, head
-- included (above 1); $10 MaxRunBytes, the most payload bytes of a run,
-- head included (0 or less: no bound; the head comes whatever its size).
--
-- A head's followers are the unsent messages of its aggregate right after
-- it in seq order (outbox_messages_unsent_by_aggregate, read from the
-- head's key on), taken in order until the first one that is not due, is
-- held by another transaction, or would take the run's payload beyond
-- $10; at most $9 - 1 of them. The heads come first, as in claim.sql; the
-- followers fill what the heads leave of $1 rank by rank: every head's
-- first follower before any head's second, and within a rank in the order
-- of the heads' seqs, so that the aggregates of a batch share it.
--
-- A run is contiguous. FOR UPDATE SKIP LOCKED leaves a row another
-- transaction holds out without a word, so the followers are ranked before
-- they are locked (candidate, wanted), and a run keeps its ranks only up to
-- the first one that was not locked (follower). A row locked but not kept
-- stays locked until this statement's transaction ends, and is not leased.
--
-- Late commits. A follower is taken only when, in this statement's
-- snapshot, every unsent message of its aggregate before it is in its run:
-- the walk reads the aggregate's unsent entries in seq order from the head
-- and stops at the first it cannot take. That is the condition under which
-- the head probe of claim_heads.sql takes a message, applied to the run's
-- rows in one snapshot, so a run keeps the guarantee heads keep: a message
-- that is not committed yet is in no snapshot, for the probe as for the
-- walk, and when the writers of an aggregate are serialised (the package
-- documentation asks for it: seq is taken at INSERT, not at commit), a
-- message committed before the next message of its aggregate was even
-- inserted, so a snapshot that sees a follower sees every earlier message
-- of its aggregate, and the walk takes it or stops at it. It never steps
-- over one.
WITH RECURSIVE {{claim_heads}},
-- The heads the claim leases, with what their runs need: a probe of the
-- primary key per head.
head AS MATERIALIZED (
    SELECT h.seq, h.aggregate_type, h.aggregate_id, octet_length(h.payload)::bigint AS bytes
    FROM {{schema}}.outbox_messages h
    WHERE h.seq = ANY (ARRAY(SELECT seq FROM due))
),
-- What the heads leave of $1 for followers.
room AS (
    SELECT greatest($1::bigint - (SELECT count(*) FROM due), 0) AS n
),
-- Each head's candidates, ranked: the first unsent messages of its
-- aggregate after it in seq order, at most $9 - 1 and no more than the
-- room, cut before the first that is not due (the rest of the aggregate
-- waits behind it) and before the first that would take the run beyond
-- $10 bytes. The row comparisons are the index scan's keys, as in the head
-- probe of claim_heads.sql: the lower one enters
-- outbox_messages_unsent_by_aggregate right after the head's key, the
-- upper one ends the scan at the aggregate's last key, and the order they
-- ask for is that index's alone (with equalities on the aggregate, the
-- primary key offers seq order too, and a generic plan may take it: a walk
-- over every later message of every aggregate).
candidate AS (
    SELECT c.seq, h.seq AS head, c.rank
    FROM head h
    CROSS JOIN LATERAL (
        SELECT n.seq, n.rank
        FROM (SELECT e.seq,
                     row_number() OVER w AS rank,
                     bool_and(e.is_due) OVER w AS all_due,
                     sum(e.bytes) OVER w AS bytes
              FROM (SELECT e.seq,
                           coalesce(   (e.status IN ('PENDING', 'FAILED') AND e.next_attempt_at <= now())
                                    OR (e.status = 'IN_FLIGHT' AND e.lease_expires_at <= now()), false) AS is_due,
                           octet_length(e.payload)::bigint AS bytes
                    FROM {{schema}}.outbox_messages e
                    WHERE e.aggregate_type = h.aggregate_type
                      AND (e.aggregate_id, e.seq) > (h.aggregate_id, h.seq)
                      AND (e.aggregate_id, e.seq) <= (h.aggregate_id, 9223372036854775807::bigint)
                      AND e.status IN ('PENDING', 'FAILED', 'IN_FLIGHT', 'DEAD_LETTER')
                    ORDER BY e.aggregate_type, e.aggregate_id, e.seq
                    LIMIT least($9::bigint - 1, (SELECT n FROM room))) e
              WINDOW w AS (ORDER BY e.seq)) n
        WHERE n.all_due
          AND ($10::bigint <= 0 OR h.bytes + n.bytes <= $10::bigint)
    ) c
),
-- The candidates that fit in the room, rank by rank. Each run's ranks
-- here are 1 to some k.
wanted AS MATERIALIZED (
    SELECT c.seq, c.head, c.rank
    FROM candidate c
    ORDER BY c.rank, c.head
    LIMIT (SELECT n FROM room)
),
-- The wanted rows this claim holds now: SKIP LOCKED leaves out those
-- another transaction holds, and a row that changed since the snapshot is
-- checked again as it is now (another claim's lease makes it not due). A
-- probe of the primary key per seq, in any plan.
locked AS MATERIALIZED (
    SELECT m.seq
    FROM {{schema}}.outbox_messages m
    WHERE m.seq = ANY (ARRAY(SELECT seq FROM wanted))
      AND m.status IN ('PENDING', 'FAILED', 'IN_FLIGHT')
      AND (   (m.status IN ('PENDING', 'FAILED') AND m.next_attempt_at <= now())
           OR (m.status = 'IN_FLIGHT' AND m.lease_expires_at <= now()))
    FOR UPDATE SKIP LOCKED
),
-- The followers: each run's ranks before its first rank that is not
-- locked. held counts the locked ranks of the run up to a row's own, which
-- equals the row's rank only when no rank before it is missing.
follower AS (
    SELECT r.seq
    FROM (SELECT w.seq, w.rank,
                 count(l.seq) OVER (PARTITION BY w.head ORDER BY w.rank) AS held
          FROM wanted w
          LEFT JOIN locked l ON l.seq = w.seq) r
    WHERE r.held = r.rank
)
-- The lease of claim.sql, over the heads and the followers.
UPDATE {{schema}}.outbox_messages m
SET next_attempt_at = now() + $4::bigint * interval '1 millisecond',
    lease_owner = $2,
    lease_token = $3,
    lease_expires_at = now() + $4::bigint * interval '1 millisecond'
WHERE m.seq = ANY (ARRAY(SELECT seq FROM due UNION ALL SELECT seq FROM follower))
-- The columns of claim.sql. by_aggregate_pos is looked up for heads only:
-- a follower is not in by_aggregate, and the lookup would read
-- by_aggregate on past the heads the claim took, locking more.
RETURNING m.seq, m.id, m.aggregate_type, m.aggregate_id, m.event_type, m.event_version,
          m.topic, m.payload, m.content_type, m.headers, m.correlation_id, m.causation_id,
          m.traceparent, m.created_at, 'IN_FLIGHT', m.attempts, m.next_attempt_at, m.last_error,
          m.lease_owner, m.lease_expires_at, m.published_at,
          CASE WHEN m.seq >= (SELECT hi FROM win) AND m.seq = ANY (ARRAY(SELECT seq FROM due))
               THEN (SELECT b.pos FROM by_aggregate b WHERE b.seq = m.seq LIMIT 1)
          END AS by_aggregate_pos

-- The heads of a claim: the CTEs that claim.sql and claim_run.sql include
-- in place of {{claim_heads}}, after WITH RECURSIVE. Their last, due, is
-- the seqs of up to $1 due heads of aggregates, locked (FOR UPDATE SKIP
-- LOCKED): the rows this claim leases first.
--
-- $1 limit, $5 the claim floor: the scan starts there (0 for a full
-- claim; see queue.go), $6 the span of seqs the scan in seq order looks
-- at, $7 and $8 the aggregate after which the scan by aggregate starts
-- (see below).
--
-- A message is claimable if it is due and the head of its aggregate: nothing
-- earlier of it is unsent. Two scans find such heads.
--
-- by_seq walks the due messages in seq order, oldest first, from the floor,
-- and checks each for an earlier unsent message of its aggregate. Most due
-- messages are heads when the backlog spreads over many aggregates, and the
-- walk stops after $1 of them. When it sits on a few aggregates (a hot
-- aggregate, or a broker outage that left each aggregate a queue of its own)
-- most are not, and an unbounded walk would read the whole backlog on every
-- claim. So the walk stops at $6 seqs past the first due message (win.hi).
--
-- by_aggregate finds the heads beyond that span: it steps from one
-- aggregate with unsent messages to the next in
-- outbox_messages_unsent_by_aggregate (a skip scan, one index descent per
-- aggregate), whose first entry is the aggregate's head, and takes the heads
-- that are due and lie at or above win.hi. It starts after the aggregate
-- the store's previous claim by aggregate ended with ($7, $8) and wraps
-- around, so that no aggregate waits for the others to drain. It runs only
-- when something due lies at or above win.hi (a one-time filter), which in
-- the steady state, where the backlog is short, is never.
win AS (
    SELECT (SELECT m.seq
            FROM {{schema}}.outbox_messages m
            WHERE m.status IN ('PENDING', 'FAILED', 'IN_FLIGHT')
              AND m.seq >= $5
              AND (   (m.status IN ('PENDING', 'FAILED') AND m.next_attempt_at <= now())
                   OR (m.status = 'IN_FLIGHT' AND m.lease_expires_at <= now()))
            ORDER BY m.seq
            LIMIT 1) + $6::bigint AS hi
),
by_seq AS (
    SELECT m.seq
    FROM {{schema}}.outbox_messages m
    -- The same predicate as outbox_messages_due, so the planner can use that
    -- partial index: a scan in seq order over unsent rows only.
    WHERE m.status IN ('PENDING', 'FAILED', 'IN_FLIGHT')
      AND m.seq >= $5
      AND m.seq < (SELECT hi FROM win)
      AND (   (m.status IN ('PENDING', 'FAILED') AND m.next_attempt_at <= now())
           OR (m.status = 'IN_FLIGHT' AND m.lease_expires_at <= now()))
      -- Only the head of an aggregate: nothing earlier of it is unsent.
      -- The probe reads outbox_messages_unsent_by_aggregate backwards from
      -- the row's own key to the nearest visible unsent entry of its
      -- aggregate, so a message behind others of its aggregate costs one
      -- step (a NOT EXISTS would read forward from the aggregate's first
      -- key, through the entries its sent messages leave until vacuum, for
      -- every row). The two row comparisons are the scan's keys: the upper
      -- one enters the index at the row's key, the lower one ends the scan
      -- at the aggregate's first key. (With equalities on aggregate_type
      -- and aggregate_id as keys, PostgreSQL enters at the aggregate's last
      -- key and walks back over its backlog; with seq < m.seq, the primary
      -- key offers the same order and the planner may take it, a walk back
      -- over the whole table.)
      -- Selecting e.status makes it read the heap, which marks dead entries
      -- for later scans to skip; an index-only scan does not.
      AND (SELECT e.status
           FROM {{schema}}.outbox_messages e
           WHERE e.aggregate_type = m.aggregate_type
             AND (e.aggregate_id, e.seq) < (m.aggregate_id, m.seq)
             AND (e.aggregate_id, e.seq) > (m.aggregate_id, 0::bigint)
             AND e.status IN ('PENDING', 'FAILED', 'IN_FLIGHT', 'DEAD_LETTER')
           ORDER BY e.aggregate_type DESC, e.aggregate_id DESC, e.seq DESC
           LIMIT 1) IS NULL
    ORDER BY m.seq
    LIMIT $1
    FOR UPDATE SKIP LOCKED
),
-- The first entry of each aggregate after ($7, $8), in key order, with
-- its step.
after_start (aggregate_type, aggregate_id, seq, step) AS (
    (SELECT e.aggregate_type, e.aggregate_id, e.seq, 1::bigint
     FROM {{schema}}.outbox_messages e
     WHERE e.status IN ('PENDING', 'FAILED', 'IN_FLIGHT', 'DEAD_LETTER')
       AND (e.aggregate_type, e.aggregate_id) > ($7::text, $8::text)
     ORDER BY e.aggregate_type, e.aggregate_id, e.seq
     LIMIT 1)
    UNION ALL
    SELECT n.aggregate_type, n.aggregate_id, n.seq, a.step + 1
    FROM after_start a
    CROSS JOIN LATERAL (
        SELECT e.aggregate_type, e.aggregate_id, e.seq
        FROM {{schema}}.outbox_messages e
        WHERE e.status IN ('PENDING', 'FAILED', 'IN_FLIGHT', 'DEAD_LETTER')
          AND (e.aggregate_type, e.aggregate_id) > (a.aggregate_type, a.aggregate_id)
        ORDER BY e.aggregate_type, e.aggregate_id, e.seq
        LIMIT 1
    ) n
),
-- Then from the first aggregate up to ($7, $8): the wrap-around.
up_to_start (aggregate_type, aggregate_id, seq, step) AS (
    (SELECT e.aggregate_type, e.aggregate_id, e.seq, 1::bigint
     FROM {{schema}}.outbox_messages e
     WHERE e.status IN ('PENDING', 'FAILED', 'IN_FLIGHT', 'DEAD_LETTER')
       AND (e.aggregate_type, e.aggregate_id) <= ($7::text, $8::text)
     ORDER BY e.aggregate_type, e.aggregate_id, e.seq
     LIMIT 1)
    UNION ALL
    SELECT n.aggregate_type, n.aggregate_id, n.seq, a.step + 1
    FROM up_to_start a
    CROSS JOIN LATERAL (
        SELECT e.aggregate_type, e.aggregate_id, e.seq
        FROM {{schema}}.outbox_messages e
        WHERE e.status IN ('PENDING', 'FAILED', 'IN_FLIGHT', 'DEAD_LETTER')
          AND (e.aggregate_type, e.aggregate_id) > (a.aggregate_type, a.aggregate_id)
          AND (e.aggregate_type, e.aggregate_id) <= ($7::text, $8::text)
        ORDER BY e.aggregate_type, e.aggregate_id, e.seq
        LIMIT 1
    ) n
),
-- pos is the head's place in the scan, for the store's next start.
by_aggregate AS (
    SELECT l.seq, h.pos
    FROM (SELECT h.seq, h.step AS pos FROM after_start h
          UNION ALL
          SELECT h.seq, (1::bigint << 40) + h.step FROM up_to_start h) h
    -- A probe of the head's row per head (the locking clause keeps the
    -- planner from joining the heads with a scan of every row above
    -- win.hi), stopped by LIMIT once enough were found.
    CROSS JOIN LATERAL (
        SELECT m.seq
        FROM {{schema}}.outbox_messages m
        WHERE m.seq = h.seq
          AND m.status IN ('PENDING', 'FAILED', 'IN_FLIGHT')
          AND (   (m.status IN ('PENDING', 'FAILED') AND m.next_attempt_at <= now())
               OR (m.status = 'IN_FLIGHT' AND m.lease_expires_at <= now()))
        FOR UPDATE SKIP LOCKED
    ) l
    WHERE h.seq >= (SELECT hi FROM win)
      -- The one-time filter: is anything due at or above win.hi? Ordered
      -- by seq, so that it is a scan of outbox_messages_due from there
      -- that stops at the first match (as EXISTS, the generic plan scanned
      -- all of outbox_messages_unsent_by_aggregate).
      AND (SELECT d.seq
           FROM {{schema}}.outbox_messages d
           WHERE d.status IN ('PENDING', 'FAILED', 'IN_FLIGHT')
             AND d.seq >= (SELECT hi FROM win)
             AND (   (d.status IN ('PENDING', 'FAILED') AND d.next_attempt_at <= now())
                  OR (d.status = 'IN_FLIGHT' AND d.lease_expires_at <= now()))
           ORDER BY d.seq
           LIMIT 1) IS NOT NULL
    LIMIT $1
),
due AS (
    SELECT seq FROM by_seq
    UNION ALL
    SELECT seq FROM by_aggregate
    LIMIT $1
)

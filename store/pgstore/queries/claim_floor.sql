-- Store.Claim: what the claim floor is computed from (see queue.go). Run in
-- the claim's round trip just before the claim itself (from the current
-- floor), and now and then on its own from seq 0 (the probe below the floor).
--
-- low: the lowest seq at or above $1 of a message that is due now (the
-- claim's own "due" condition), or NULL. An ordered scan of
-- outbox_messages_due from $1 that stops at the first match. A message
-- waiting behind a dead letter of its aggregate does not count: it waits
-- for an operator, and the floor must not stay below it meanwhile (when the
-- dead letter is replayed, the probe finds that one).
--
-- top: the highest committed seq, or NULL (a backward scan of the primary
-- key). A transaction still open now may hold lower seqs; queue.go lets the
-- floor pass this value only a FullClaimInterval later, so that only a
-- transaction that takes longer than that to commit lands below the floor.
--
-- $1 where the scan starts, $2 where it ends (exclusive): the largest bigint
-- but for the pieces of a Store's first probe (the sweep, see queue.go).
SELECT (SELECT m.seq
        FROM {{schema}}.outbox_messages m
        WHERE m.status IN ('PENDING', 'FAILED', 'IN_FLIGHT')
          AND m.seq >= $1
          AND m.seq < $2
          AND (   (m.status IN ('PENDING', 'FAILED') AND m.next_attempt_at <= now())
               OR (m.status = 'IN_FLIGHT' AND m.lease_expires_at <= now()))
          AND NOT EXISTS (
              {{earlier_unsent}}
                AND e.status = 'DEAD_LETTER'
              -- OFFSET 0 keeps this a probe per candidate. Without it the
              -- planner, expecting almost no dead letters, may read every
              -- entry of outbox_messages_unsent_by_aggregate once into a
              -- Materialize (50,000 entries, 25 ms, for each claim).
              OFFSET 0)
        ORDER BY m.seq
        LIMIT 1) AS low,
       (SELECT max(seq) FROM {{schema}}.outbox_messages) AS top

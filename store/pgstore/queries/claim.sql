-- Store.Claim: one autocommit statement. It picks due heads of aggregates
-- (claim_heads.sql) and locks them, skipping rows another claim holds; the
-- UPDATE leases them. No transaction stays open after it returns.
--
-- This is the claim of heads only, for ClaimParams.MaxRun 0 or 1: at most
-- one message per aggregate. With MaxRun above 1 the store runs
-- claim_run.sql instead, a claim of runs: the same heads, and with each
-- head its followers, the unsent messages of its aggregate right after it
-- in seq order, taken while each is due, not held by another transaction,
-- and within the run's bounds (MaxRun messages, MaxRunBytes of payload),
-- up to the first that is not; never one past a message it did not take.
-- The followers fill the room the heads leave in the batch rank by rank,
-- and all rows of a claim share its lease token.
--
-- $1 limit, $2 lease owner, $3 lease token, $4 lease length in milliseconds,
-- $5 the claim floor: the scan starts there (0 for a full claim; see
-- queue.go), $6 the span of seqs the scan in seq order looks at, $7 and $8
-- the aggregate after which the scan by aggregate starts (claim_heads.sql).
WITH RECURSIVE {{claim_heads}}
-- The lease is the lease columns and next_attempt_at; status stays PENDING
-- (or FAILED). No index covers those columns or has them in its predicate,
-- so PostgreSQL can update the row in place (a HOT update, where the page
-- has room, as the page a message was just inserted into has): no new index
-- entries, and a smaller WAL record. Setting status to IN_FLIGHT would
-- write four index entries per message (the primary key, id and both
-- partial indexes, whose predicates name status) and leave as many dead
-- ones behind for the next claims to skip. A leased
-- row is not due until the lease ends (next_attempt_at), still unsent for the
-- probe of later messages of its aggregate, and IN_FLIGHT to every reader
-- (get.sql, counts.sql and RETURNING below: a PENDING or FAILED row with a
-- lease token). Rows stored IN_FLIGHT by earlier versions keep their
-- status and are due when their lease ends, as before.
UPDATE {{schema}}.outbox_messages m
SET next_attempt_at = now() + $4::bigint * interval '1 millisecond',
    lease_owner = $2,
    lease_token = $3,
    lease_expires_at = now() + $4::bigint * interval '1 millisecond'
-- = ANY of the CTE's seqs rather than a join with it: the relay runs with
-- plan_cache_mode = force_generic_plan (relay_settings.sql), and a generic
-- plan does not know LIMIT $1: it expects a tenth of the table from the
-- CTE and may join it with a merge join over the whole primary key, a scan
-- of every sent row per claim. An array of seqs is a probe per seq in any
-- plan (TestClaim_GenericPlanProbesThePrimaryKeyPerSeq).
WHERE m.seq = ANY (ARRAY(SELECT seq FROM due))
-- by_aggregate_pos: the row's place in the scan by aggregate if that scan
-- found it, else NULL. The store starts its next scan by aggregate after
-- the aggregate of the highest (so that it needs no collation of its own).
-- LIMIT 1 and the CASE keep the lookup from reading by_aggregate further
-- than the claim did.
RETURNING m.seq, m.id, m.aggregate_type, m.aggregate_id, m.event_type, m.event_version,
          m.topic, m.payload, m.content_type, m.headers, m.correlation_id, m.causation_id,
          m.traceparent, m.created_at, 'IN_FLIGHT', m.attempts, m.next_attempt_at, m.last_error,
          m.lease_owner, m.lease_expires_at, m.published_at,
          CASE WHEN m.seq >= (SELECT hi FROM win)
               THEN (SELECT b.pos FROM by_aggregate b WHERE b.seq = m.seq LIMIT 1)
          END AS by_aggregate_pos

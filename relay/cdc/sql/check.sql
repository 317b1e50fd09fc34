-- The verdict on one batch from the stream, before anything is published.
-- A message is published from the stream only if its row is still PENDING,
-- its aggregate is not deferred, and no earlier message of its aggregate is
-- FAILED, IN_FLIGHT or DEAD_LETTER (the polling relay's ordering rule; the
-- probe uses outbox_messages_unsent_by_aggregate). A PENDING or FAILED row
-- with a lease token is IN_FLIGHT: a claim (pgstore's claim.sql, the table
-- path's table_claim.sql) leases a row without changing its status. Every
-- other message with an unsent row goes to the table path: its aggregate is
-- deferred in the same statement. A row that is SENT or absent was handled already (a
-- re-delivery after a restart, or a cleanup): skipped.
--
-- But the stream can deliver a commit a moment before the transaction
-- becomes visible (and, with synchronous replication, while it waits for a
-- standby): its rows look absent. So the statement also says whether the
-- message's transaction is visible in the very snapshot the rows were read
-- in (pg_current_snapshot() is the statement's snapshot); an absent row of
-- an invisible transaction must be read again, not skipped. The 32-bit xid
-- from the stream is widened to an xid8: the newest xid below the
-- snapshot's xmax with those low 32 bits.
--
-- Fenced like record.sql: the deferrals are written only while the slot's
-- lease carries the relay's token, and the last column says whether it
-- did (false: the relay lost the lead, and must publish nothing more).
--
-- $1 seqs, $2 aggregate types, $3 aggregate ids, $4 xids: one element per
-- message; $5 slot, $6 the relay's lease token.
WITH lease AS (
    SELECT 1
    FROM {{schema}}.outbox_cdc_leases
    WHERE slot_name = $5
      AND token = $6
    FOR SHARE
),
s AS (
    SELECT pg_current_snapshot() AS snap,
           pg_snapshot_xmax(pg_current_snapshot())::text::numeric AS xmax
),
b AS (
    SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[]) AS b (seq, aggregate_type, aggregate_id, xid)
),
v AS (
    -- The row's status by primary key, as a scalar subquery: a join could be
    -- planned as a hash join over the whole table, whose cost grows with
    -- the SENT rows kept.
    SELECT b.seq, b.aggregate_type, b.aggregate_id,
           (SELECT CASE WHEN m.status IN ('PENDING', 'FAILED') AND m.lease_token IS NOT NULL
                        THEN 'IN_FLIGHT' ELSE m.status END
            FROM {{schema}}.outbox_messages m WHERE m.seq = b.seq) AS status,
           pg_visible_in_snapshot(
               (s.xmax - (CASE WHEN x.diff = 0 THEN 4294967296 ELSE x.diff END))::text::xid8,
               s.snap) AS visible,
           EXISTS (SELECT 1 FROM {{schema}}.outbox_cdc_deferred d
                   WHERE d.aggregate_type = b.aggregate_type
                     AND d.aggregate_id = b.aggregate_id) AS deferred,
           EXISTS (SELECT 1 FROM {{schema}}.outbox_messages e
                   WHERE e.aggregate_type = b.aggregate_type
                     AND e.aggregate_id = b.aggregate_id
                     AND e.seq < b.seq
                     AND (e.status IN ('FAILED', 'IN_FLIGHT', 'DEAD_LETTER')
                          OR (e.status = 'PENDING' AND e.lease_token IS NOT NULL))) AS blocked
    FROM s, b
    CROSS JOIN LATERAL (SELECT ((s.xmax - b.xid) % 4294967296 + 4294967296) % 4294967296 AS diff) x
),
d AS (
    INSERT INTO {{schema}}.outbox_cdc_deferred (aggregate_type, aggregate_id, reason)
    SELECT DISTINCT ON (v.aggregate_type, v.aggregate_id) v.aggregate_type, v.aggregate_id, 'stream: ' || CASE
               WHEN v.status <> 'PENDING' THEN 'message ' || v.seq || ' was ' || v.status
               WHEN v.blocked THEN 'an earlier message was unsent'
               ELSE 'deferred' END
    FROM v
    WHERE v.status IS NOT NULL AND v.status <> 'SENT'
      AND (v.status <> 'PENDING' OR v.deferred OR v.blocked)
      AND EXISTS (SELECT 1 FROM lease)
    ON CONFLICT DO NOTHING
)
SELECT v.seq, coalesce(v.status, ''), v.deferred OR v.blocked, v.visible, EXISTS (SELECT 1 FROM lease)
FROM v

-- The outcome of one or more consecutive batches from the stream, recorded
-- in a single statement (one round trip, one commit): failed publishes,
-- deferred aggregates, and the messages the broker acknowledged. The
-- relay confirms the batches' end position only after this statement
-- committed.
--
-- Failures are recorded as the polling relay records them: FAILED with the
-- next attempt scheduled, or DEAD_LETTER. Acknowledged messages are marked
-- SENT (record_mark.sql fills in the "sent" statement) or deleted
-- (record_delete.sql, Cleanup "delete").
-- Only rows still PENDING and not leased change: a row another relay holds
-- (a lease token, see check.sql) or sent keeps its state. Rows are found by
-- primary key; the seqs of failures and of acknowledged messages are
-- disjoint.
--
-- Fenced: nothing changes unless the slot's lease (lease_setup.sql) still
-- carries the relay's token. The lease row stays locked (FOR SHARE) until
-- the statement commits, so a standby's takeover (lease_seize.sql,
-- lease_take.sql) waits for it, and no record of the old relay commits
-- after the takeover. The first column says whether the relay held the
-- lease; false: it lost the lead, and nothing was recorded.
--
-- $1 failed seqs, $2 errors, $3 delays in milliseconds, $4 dead letter,
-- $9 count the attempt (false when the message's topic could not take
-- records: not the message's fault); $5 deferred aggregate types, $6
-- aggregate ids, $7 reasons; $8 acknowledged seqs; $10 slot, $11 the
-- relay's lease token.
WITH lease AS (
    SELECT 1
    FROM {{schema}}.outbox_cdc_leases
    WHERE slot_name = $10
      AND token = $11
    FOR SHARE
),
failed AS (
    UPDATE {{schema}}.outbox_messages m
    SET attempts = m.attempts + CASE WHEN f.count_attempt THEN 1 ELSE 0 END,
        status = CASE WHEN f.dead THEN 'DEAD_LETTER' ELSE 'FAILED' END,
        next_attempt_at = now() + f.delay_ms * interval '1 millisecond',
        last_error = f.error
    FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::bool[], $9::bool[]) AS f (seq, error, delay_ms, dead, count_attempt)
    WHERE m.seq = f.seq
      AND m.status = 'PENDING'
      AND m.lease_token IS NULL
      AND EXISTS (SELECT 1 FROM lease)
    RETURNING 1
),
deferred AS (
    INSERT INTO {{schema}}.outbox_cdc_deferred (aggregate_type, aggregate_id, reason)
    SELECT * FROM unnest($5::text[], $6::text[], $7::text[])
    WHERE EXISTS (SELECT 1 FROM lease)
    ON CONFLICT DO NOTHING
    RETURNING 1
),
sent AS (
{{sent}}
)
SELECT EXISTS (SELECT 1 FROM lease), (SELECT count(*) FROM failed), (SELECT count(*) FROM deferred), (SELECT count(*) FROM sent)

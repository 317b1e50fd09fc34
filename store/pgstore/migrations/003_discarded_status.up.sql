-- DISCARDED: a dead letter an operator gave up on (ops.Discard). It is
-- terminal and kept for audit, and it does not block its aggregate: the
-- claim's ordering probe (queries/claim.sql) and the partial index
-- outbox_messages_unsent_by_aggregate list only PENDING, FAILED, IN_FLIGHT
-- and DEAD_LETTER, so neither changes.
--
-- NOT VALID: every existing row passed the old, narrower check, so it passes
-- this one, and the table need not be scanned under the ALTER's lock. New
-- and updated rows are checked as usual.
ALTER TABLE {{schema}}.outbox_messages
    DROP CONSTRAINT outbox_messages_status_check,
    ADD CONSTRAINT outbox_messages_status_check
        CHECK (status IN ('PENDING', 'IN_FLIGHT', 'SENT', 'FAILED', 'DEAD_LETTER', 'DISCARDED')) NOT VALID;

-- When the message was discarded; NULL for every other status. Retention
-- (ops.Cleanup with IncludeDiscarded) ages discarded rows by it. Adding a
-- nullable column without a default does not rewrite the table.
ALTER TABLE {{schema}}.outbox_messages ADD COLUMN IF NOT EXISTS discarded_at timestamptz;

-- Used by ops.Stats (the DISCARDED count) and ops.Cleanup with
-- IncludeDiscarded (discarded rows older than the cutoff, oldest first).
-- Partial and so tiny: discarded messages are rare. Building it still reads
-- the table while writes wait (about a second per million rows); on a large
-- existing table create it first with CREATE INDEX CONCURRENTLY and the
-- same name and definition, and this statement does nothing.
CREATE INDEX IF NOT EXISTS outbox_messages_discarded
    ON {{schema}}.outbox_messages (discarded_at)
    WHERE status = 'DISCARDED';

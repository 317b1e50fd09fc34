-- Cursor mode (see queue.go and cursor.go): the relay reads the outbox in
-- seq order like a log and keeps its place in one row, instead of claiming
-- and marking every message. It is off until EnableCursor turns it on;
-- this migration only prepares the table.
--
-- QUEUED: a message written while cursor mode is on (EnableCursor makes it
-- the column's default). It is sent once the cursor's position passed it
-- (seq <= outbox_cursor.position) and unsent before. A QUEUED row is in
-- none of the partial indexes (outbox_messages_due, _unsent_by_aggregate,
-- _sent), so an enqueue writes two index entries instead of four, and the
-- relay changes the row only when its publish fails (it becomes FAILED or
-- DEAD_LETTER, and later messages of its aggregate PENDING: the table path,
-- which claims and marks as before).
--
-- NOT VALID, as in migration 003: every existing row passed the narrower
-- check, and the table need not be scanned under the ALTER's lock.
ALTER TABLE {{schema}}.outbox_messages
    DROP CONSTRAINT outbox_messages_status_check,
    ADD CONSTRAINT outbox_messages_status_check
        CHECK (status IN ('PENDING', 'IN_FLIGHT', 'SENT', 'FAILED', 'DEAD_LETTER', 'DISCARDED', 'QUEUED')) NOT VALID;

-- The cursor: at most one row, present once cursor mode was turned on.
CREATE TABLE {{schema}}.outbox_cursor (
    one              bool        PRIMARY KEY DEFAULT true CHECK (one),
    -- Off again after DisableCursor: the relay claims as before, and
    -- position stays, so that QUEUED rows at or below it still count as
    -- sent.
    active           bool        NOT NULL DEFAULT true,
    -- Every QUEUED message with seq <= position was published (the broker
    -- acknowledged it) or moved to the table path.
    position         bigint      NOT NULL,
    -- The relay that leads: only it reads and publishes QUEUED messages,
    -- until lease_expires_at; a standby takes over after that.
    lease_owner      text,
    lease_token      uuid,
    lease_expires_at timestamptz,
    -- When position was last saved.
    saved_at         timestamptz NOT NULL DEFAULT now(),
    enabled_at       timestamptz NOT NULL DEFAULT now()
);

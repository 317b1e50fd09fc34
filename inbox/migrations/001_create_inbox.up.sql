-- Processed messages, one row per consumer and message. Inbox.Handle
-- inserts the row first in the handler's transaction (a plain INSERT, see
-- queries/mark_processed.sql); the primary key makes a second delivery of
-- the same message fail with unique_violation, which Handle reports as a
-- duplicate. A concurrent second delivery waits on the first one's row
-- lock and then gets the violation, or proceeds if the first rolled back.
CREATE TABLE {{schema}}.inbox_processed (
    consumer     text        NOT NULL,
    message_id   uuid        NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, message_id)
);

-- Used by Inbox.Cleanup (queries/cleanup.sql): the oldest ids first, in
-- bounded batches, without scanning the rows that are kept.
CREATE INDEX inbox_processed_processed_at
    ON {{schema}}.inbox_processed (processed_at);

-- Parked messages: what a consumer gave up on (a malformed record, a
-- permanent handler error, or too many failed attempts), kept with
-- everything needed to replay it.
CREATE TABLE {{schema}}.inbox_parked (
    -- id is the parked entry's own id (Parked.ID), used by Replay.
    id               uuid        PRIMARY KEY,
    consumer         text        NOT NULL,
    -- message_id is the eventId; the nil UUID for a record without one.
    message_id       uuid        NOT NULL,
    event_type       text        NOT NULL DEFAULT '',
    aggregate_id     text        NOT NULL DEFAULT '',
    topic            text        NOT NULL DEFAULT '',
    partition        int         NOT NULL DEFAULT 0,
    record_offset    bigint      NOT NULL DEFAULT 0,
    record_timestamp timestamptz,
    headers          jsonb       NOT NULL DEFAULT '{}',
    payload          bytea,
    error            text        NOT NULL,
    attempts         int         NOT NULL,
    parked_at        timestamptz NOT NULL DEFAULT now(),
    -- replayed_at is set when a Replay applied the message (or found it
    -- already applied); the row is kept for audit.
    replayed_at      timestamptz,
    -- A record parked again after a crash before its offset was committed
    -- is the same entry (queries/park.sql: ON CONFLICT DO NOTHING).
    UNIQUE (consumer, topic, partition, record_offset, message_id)
);

-- Used by Inbox.Parked (queries/parked.sql) for the default listing: the
-- entries of a consumer not yet replayed, oldest first.
CREATE INDEX inbox_parked_open
    ON {{schema}}.inbox_parked (consumer, parked_at)
    WHERE replayed_at IS NULL;

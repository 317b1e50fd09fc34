-- Processed messages, one row per consumer and message. SQLiteInbox.Handle
-- inserts the row first in the handler's write transaction (a plain
-- INSERT, see queries/mark_processed.sql); the primary key makes a second
-- delivery of the same message fail with SQLITE_CONSTRAINT_PRIMARYKEY,
-- which Handle reports as a duplicate. Write transactions of a database
-- from sqlitestore.Open take the write lock at BEGIN, so a concurrent
-- second delivery starts only after the first one committed (then it gets
-- the violation) or rolled back (then it proceeds). Times are unix
-- milliseconds by the database clock; STRICT enforces the column types.
CREATE TABLE "{{prefix}}inbox_processed" (
    consumer     TEXT    NOT NULL,
    -- message_id is the eventId, a UUID in its canonical text form.
    message_id   TEXT    NOT NULL,
    processed_at INTEGER NOT NULL DEFAULT ({{now_ms}}),
    PRIMARY KEY (consumer, message_id)
) STRICT;

-- Used by SQLiteInbox.Cleanup (queries/cleanup.sql): the oldest ids first,
-- in bounded batches, without reading the rows that are kept.
CREATE INDEX "{{prefix}}inbox_processed_processed_at"
    ON "{{prefix}}inbox_processed" (processed_at);

-- Parked messages: what a consumer gave up on (a malformed record, a
-- permanent handler error, or too many failed attempts), kept with
-- everything needed to replay it.
CREATE TABLE "{{prefix}}inbox_parked" (
    -- id is the parked entry's own id (Parked.ID, a UUIDv7 in text form,
    -- so that it sorts by time), used by Replay.
    id               TEXT    PRIMARY KEY,
    consumer         TEXT    NOT NULL,
    -- message_id is the eventId; the nil UUID for a record without one.
    message_id       TEXT    NOT NULL,
    event_type       TEXT    NOT NULL DEFAULT '',
    aggregate_id     TEXT    NOT NULL DEFAULT '',
    topic            TEXT    NOT NULL DEFAULT '',
    record_partition INTEGER NOT NULL DEFAULT 0,
    record_offset    INTEGER NOT NULL DEFAULT 0,
    -- the Kafka record's timestamp in unix milliseconds (Kafka's
    -- precision); NULL when unknown.
    record_timestamp INTEGER,
    -- headers is a JSON object of strings.
    headers          TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(headers)),
    payload          BLOB,
    error            TEXT    NOT NULL,
    attempts         INTEGER NOT NULL,
    parked_at        INTEGER NOT NULL DEFAULT ({{now_ms}}),
    -- replayed_at is set when a Replay applied the message (or found it
    -- already applied); the row is kept for audit.
    replayed_at      INTEGER,
    -- A record parked again after a crash before its offset was committed
    -- is the same entry (queries/park.sql: ON CONFLICT DO NOTHING).
    UNIQUE (consumer, topic, record_partition, record_offset, message_id)
) STRICT;

-- Used by SQLiteInbox.Parked (queries/parked.sql) for the default listing:
-- the entries of a consumer not yet replayed, oldest first.
CREATE INDEX "{{prefix}}inbox_parked_open"
    ON "{{prefix}}inbox_parked" (consumer, parked_at);

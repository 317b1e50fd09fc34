-- The outbox table. Applications insert into it inside their own
-- transactions (Store.Enqueue); the relay claims, publishes and marks rows.
-- Times are unix milliseconds by the database clock, so that lease and retry
-- arithmetic is exact integer arithmetic. STRICT makes SQLite enforce the
-- column types.
CREATE TABLE "{{prefix}}messages" (
    -- seq orders messages: within an aggregate the relay publishes in seq
    -- order. AUTOINCREMENT: a seq is never reused, even after Cleanup
    -- deleted the newest rows.
    seq              INTEGER PRIMARY KEY AUTOINCREMENT,
    -- id is the event id (a UUID in its canonical text form); its unique
    -- index serves Store.Get.
    id               TEXT    NOT NULL UNIQUE,
    aggregate_type   TEXT    NOT NULL,
    aggregate_id     TEXT    NOT NULL,
    event_type       TEXT    NOT NULL,
    event_version    INTEGER NOT NULL DEFAULT 1,
    topic            TEXT    NOT NULL DEFAULT '',
    payload          BLOB    NOT NULL,
    content_type     TEXT    NOT NULL DEFAULT 'application/json',
    -- headers is a JSON object of strings.
    headers          TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(headers)),
    correlation_id   TEXT    NOT NULL DEFAULT '',
    causation_id     TEXT    NOT NULL DEFAULT '',
    traceparent      TEXT    NOT NULL DEFAULT '',
    created_at       INTEGER NOT NULL DEFAULT ({{now_ms}}),
    status           TEXT    NOT NULL DEFAULT 'PENDING'
        CHECK (status IN ('PENDING', 'IN_FLIGHT', 'SENT', 'FAILED', 'DEAD_LETTER')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  INTEGER NOT NULL DEFAULT ({{now_ms}}),
    last_error       TEXT    NOT NULL DEFAULT '',
    lease_owner      TEXT,
    lease_token      TEXT,
    lease_expires_at INTEGER,
    published_at     INTEGER
) STRICT;

-- Used by the claim (queries/claim.sql, the inner SELECT): it scans unsent
-- rows in seq order and stops after LIMIT. Partial, so that the many SENT
-- (and DEAD_LETTER) rows a busy outbox accumulates are not in it and the
-- scan stays proportional to the backlog, not to the table. The claim
-- repeats the WHERE term word for word, which is what lets SQLite's planner
-- use a partial index.
CREATE INDEX "{{prefix}}messages_due"
    ON "{{prefix}}messages" (seq)
    WHERE status IN ('PENDING', 'FAILED', 'IN_FLIGHT');

-- Used by the claim's ordering probe (the NOT EXISTS in queries/claim.sql):
-- "is there an earlier unsent message of this aggregate?" is one index range
-- lookup on (aggregate_type, aggregate_id, seq < m.seq). DEAD_LETTER is in
-- the predicate because a dead letter blocks its aggregate.
CREATE INDEX "{{prefix}}messages_unsent_by_aggregate"
    ON "{{prefix}}messages" (aggregate_type, aggregate_id, seq)
    WHERE status IN ('PENDING', 'FAILED', 'IN_FLIGHT', 'DEAD_LETTER');

-- Used by Store.Cleanup (queries/cleanup.sql): the oldest SENT rows first,
-- without reading the rows that are not SENT.
CREATE INDEX "{{prefix}}messages_sent_by_published_at"
    ON "{{prefix}}messages" (published_at)
    WHERE status = 'SENT';

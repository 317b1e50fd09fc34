-- The outbox table. Applications insert into it inside their own
-- transactions (Store.Enqueue); the relay claims, publishes and marks rows.
CREATE TABLE {{schema}}.outbox_messages (
    -- seq orders messages: within an aggregate the relay publishes in seq order.
    seq              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- id is the event id; its unique index serves Store.Get.
    id               uuid        NOT NULL UNIQUE,
    aggregate_type   text        NOT NULL,
    aggregate_id     text        NOT NULL,
    event_type       text        NOT NULL,
    event_version    int         NOT NULL,
    topic            text        NOT NULL DEFAULT '',
    payload          bytea       NOT NULL,
    content_type     text        NOT NULL,
    headers          jsonb       NOT NULL DEFAULT '{}',
    correlation_id   text        NOT NULL DEFAULT '',
    causation_id     text        NOT NULL DEFAULT '',
    traceparent      text        NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    status           text        NOT NULL DEFAULT 'PENDING'
        CHECK (status IN ('PENDING', 'IN_FLIGHT', 'SENT', 'FAILED', 'DEAD_LETTER')),
    attempts         int         NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    last_error       text        NOT NULL DEFAULT '',
    lease_owner      text,
    lease_token      uuid,
    lease_expires_at timestamptz,
    published_at     timestamptz
);

-- Used by the claim (queries/claim.sql, the "due" CTE): it scans unsent rows
-- in seq order and stops after LIMIT. Partial, so that the millions of SENT
-- (and DEAD_LETTER) rows a busy outbox accumulates are not in it and the scan
-- stays proportional to the backlog, not to the table.
CREATE INDEX outbox_messages_due
    ON {{schema}}.outbox_messages (seq)
    WHERE status IN ('PENDING', 'FAILED', 'IN_FLIGHT');

-- Used by the claim's ordering probe (the NOT EXISTS in queries/claim.sql):
-- "is there an earlier unsent message of this aggregate?" is one index range
-- lookup on (aggregate_type, aggregate_id, seq < m.seq). DEAD_LETTER is in
-- the predicate because a dead letter blocks its aggregate.
CREATE INDEX outbox_messages_unsent_by_aggregate
    ON {{schema}}.outbox_messages (aggregate_type, aggregate_id, seq)
    WHERE status IN ('PENDING', 'FAILED', 'IN_FLIGHT', 'DEAD_LETTER');

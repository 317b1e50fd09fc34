-- Resumable republishing of SENT messages (ops.Republish, "outbox replay"):
-- one row per named run, holding its parameters and the last seq it
-- published, so that a run stopped by a crash or a signal continues where
-- it stopped.
CREATE TABLE {{schema}}.outbox_republish_cursors (
    name           text        PRIMARY KEY,
    since          timestamptz NOT NULL,
    aggregate_type text        NOT NULL DEFAULT '',
    event_type     text        NOT NULL DEFAULT '',
    -- The highest seq when the run first started: later messages are the
    -- relay's to publish, so a resumed run does not chase them.
    until_seq      bigint      NOT NULL,
    -- The last seq published (0 before the first).
    last_seq       bigint      NOT NULL DEFAULT 0,
    published      bigint      NOT NULL DEFAULT 0,
    started_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    finished_at    timestamptz
);

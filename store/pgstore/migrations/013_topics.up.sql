-- What each relay knows of the topics it publishes to (ops.ReportTopics),
-- so that "outbox stats" and every relay's status page can show the topics
-- published to recently and those that cannot take records (missing, not
-- authorized, without a leader) while their messages wait. Each relay
-- writes its own rows every few seconds; readers take the rows reported
-- in the last minute, so a stopped relay's rows fade out, and reports
-- delete rows a day old.
CREATE TABLE {{schema}}.outbox_topics (
    relay_id            text        NOT NULL,
    topic               text        NOT NULL,
    published           bigint      NOT NULL DEFAULT 0,
    published_last_hour bigint      NOT NULL DEFAULT 0,
    first_published_at  timestamptz,
    last_published_at   timestamptz,
    unavailable_since   timestamptz,
    reason              text        NOT NULL DEFAULT '',
    fix                 text        NOT NULL DEFAULT '',
    reported_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (relay_id, topic)
);

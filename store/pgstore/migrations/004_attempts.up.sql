-- Every counted failed attempt of a message, with its error, for
-- "outbox dlq show". Store.MarkFailed inserts one row per failure in the
-- same statement that marks the message (queries/mark_failed.sql), so the
-- history and the message's state never disagree. Failures that were not
-- the message's fault (the broker was unreachable) are not attempts and are
-- not recorded, so a message has at most MaxAttempts rows.
--
-- seq refers to outbox_messages.seq without a foreign key: ops.Cleanup
-- deletes a message's attempts in the statement that deletes the message,
-- and no FK check or cascade is added to the relay's hot path.
CREATE TABLE {{schema}}.outbox_attempts (
    seq        bigint      NOT NULL,
    id         bigint      GENERATED ALWAYS AS IDENTITY,
    message_id uuid        NOT NULL,
    -- The message's attempts count after this failure.
    attempt    int         NOT NULL,
    error      text        NOT NULL,
    -- The failure moved the message to DEAD_LETTER.
    dead       bool        NOT NULL,
    at         timestamptz NOT NULL DEFAULT now(),
    -- (seq, id): one index serves reading a message's history in order
    -- (ops.DeadLetter) and deleting it with the message (ops.Cleanup).
    PRIMARY KEY (seq, id)
);

-- The operators' audit log: every replay, discard, republish and cleanup
-- (package ops) records who did it, when, why, and to which messages, in
-- the same transaction as the change itself (replay and discard).
CREATE TABLE {{schema}}.outbox_audit (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    actor       text        NOT NULL,
    action      text        NOT NULL
        CHECK (action IN ('replay', 'discard', 'republish', 'cleanup')),
    reason      text        NOT NULL DEFAULT '',
    -- The messages changed (replay, discard); empty for republish and
    -- cleanup, which describe what they did in filter.
    message_ids uuid[]      NOT NULL DEFAULT '{}',
    -- The selection as given: a dead-letter filter, a republish cursor and
    -- its parameters, a cleanup cutoff.
    filter      jsonb,
    -- How many messages the operation changed, published or deleted.
    count       bigint      NOT NULL DEFAULT 0
);

-- Used by ops.DeadLetter: the audit entries that name one message
-- (message_ids @> ARRAY[id]).
CREATE INDEX outbox_audit_message_ids ON {{schema}}.outbox_audit USING gin (message_ids);

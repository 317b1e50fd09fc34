-- The relay's own tables, next to the outbox table. Created by the relay at
-- start, idempotently (under setup_lock.sql), so that CDC needs no migration
-- of the store. Nothing else writes them.

-- The slots this outbox has used. A row here whose slot is gone means the
-- slot was lost: the relay refuses to start rather than create a new slot
-- silently (see ErrSlotLost).
CREATE TABLE IF NOT EXISTS {{schema}}.outbox_cdc_slots (
    slot_name      text        PRIMARY KEY,
    publication    text        NOT NULL,
    -- The slot's consistent point: the stream holds every transaction that
    -- committed after it.
    consistent_lsn pg_lsn      NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    created_by     text        NOT NULL
);

-- Aggregates whose messages go through the table path (claim, publish,
-- mark, like the polling relay) instead of the stream: one of their messages
-- failed or was dead-lettered, another relay held one, or they had unsent
-- messages when the slot was created. The table path removes an aggregate
-- once none of its messages is unsent.
CREATE TABLE IF NOT EXISTS {{schema}}.outbox_cdc_deferred (
    aggregate_type text        NOT NULL,
    aggregate_id   text        NOT NULL,
    deferred_at    timestamptz NOT NULL DEFAULT now(),
    reason         text        NOT NULL DEFAULT '',
    PRIMARY KEY (aggregate_type, aggregate_id)
);

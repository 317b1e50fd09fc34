-- The dead letters by seq, so that listing and grouping them (ops'
-- DeadLetters and DeadLetterGroups: "outbox dlq list", the status page)
-- reads only them, not every unsent message: behind a backlog of 100,000
-- pending messages the other indexes made each read walk the backlog. Few
-- rows are ever dead letters, so the index is small, and a message enters
-- it only when it becomes one (status is in other indexes' predicates
-- already, so no update that was HOT before stops being HOT).
--
-- Migrate runs in a transaction, so this CREATE INDEX blocks writes to the
-- table while it builds (about a second per million rows). On a large
-- existing table, build it first without blocking, with the same name:
--   CREATE INDEX CONCURRENTLY outbox_messages_dead
--       ON <schema>.outbox_messages (seq) WHERE status = 'DEAD_LETTER';
-- and this migration then finds it and does nothing.
CREATE INDEX IF NOT EXISTS outbox_messages_dead
    ON {{schema}}.outbox_messages (seq)
    WHERE status = 'DEAD_LETTER';

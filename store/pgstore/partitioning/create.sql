-- Store.EnsurePartitions: one new partition [{{from}}, {{to}}). It is built
-- as a table of its own, filled with any rows of that range that went to the
-- default partition while no partition covered it, and then attached.
-- ATTACH PARTITION takes only a SHARE UPDATE EXCLUSIVE lock on
-- outbox_messages (CREATE TABLE ... PARTITION OF would take an ACCESS
-- EXCLUSIVE one), so enqueues and claims go on meanwhile; the default
-- partition is locked while it is scanned, which is quick while it is empty,
-- as it is when partitions are created ahead.
--
-- No identity here: seq comes from outbox_messages' identity on insert.
CREATE TABLE {{schema}}.{{partition}}
    (LIKE {{schema}}.outbox_messages INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    {{with}};

-- Event ids are unique within each partition (see Store.EnsurePartitions).
CREATE UNIQUE INDEX {{id_index}} ON {{schema}}.{{partition}} (id);

WITH moved AS (
    DELETE FROM {{schema}}.outbox_messages_default
    WHERE created_at >= {{from}} AND created_at < {{to}}
    RETURNING *
)
INSERT INTO {{schema}}.{{partition}} SELECT * FROM moved;

ALTER TABLE {{schema}}.outbox_messages
    ATTACH PARTITION {{schema}}.{{partition}} FOR VALUES FROM ({{from}}) TO ({{to}});

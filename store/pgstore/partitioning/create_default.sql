-- The default partition takes the rows no other partition covers, so an
-- enqueue never fails because maintenance fell behind. The next
-- Store.EnsurePartitions moves them into the partition created for them.
CREATE TABLE IF NOT EXISTS {{schema}}.outbox_messages_default
    PARTITION OF {{schema}}.outbox_messages DEFAULT
    {{with}};

CREATE UNIQUE INDEX IF NOT EXISTS outbox_messages_default_id_key
    ON {{schema}}.outbox_messages_default (id);

-- Only inserts are published: the relay's own updates (marks, dead letters)
-- and deletes (cleanup) must not flow back through the stream. With
-- publish_via_partition_root, an insert into a partition of a partitioned
-- outbox_messages (pgstore's Partitioning) arrives as an insert into
-- outbox_messages itself, and partitions created or dropped later need no
-- change here; on a plain table the option changes nothing.
CREATE PUBLICATION {{publication}} FOR TABLE {{schema}}.outbox_messages
    WITH (publish = 'insert', publish_via_partition_root = true)

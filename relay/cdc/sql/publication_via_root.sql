-- An existing publication on a partitioned outbox_messages made without
-- publish_via_partition_root: from now on, inserts into the partitions are
-- published as inserts into outbox_messages. Only this option changes.
ALTER PUBLICATION {{publication}} SET (publish_via_partition_root = true)

-- Store.Migrate with Config.Partitioning: records how outbox_messages is
-- partitioned, for the maintenance that creates partitions ahead
-- (Store.EnsurePartitions) and for whoever asks (Store.PartitionInterval).
-- One row. reloptions are the storage settings of the table before it was
-- partitioned (fillfactor, autovacuum_*): a partitioned table cannot hold
-- them itself, so each new partition is created with them.
CREATE TABLE IF NOT EXISTS {{schema}}.outbox_partitioning (
    singleton        bool        PRIMARY KEY DEFAULT true CHECK (singleton),
    interval_seconds bigint      NOT NULL CHECK (interval_seconds >= 3600),
    reloptions       text[]      NOT NULL DEFAULT '{}',
    partitioned_at   timestamptz NOT NULL DEFAULT now()
);

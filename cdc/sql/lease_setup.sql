-- The lease of the active relay of each slot, created by every relay at
-- start like setup.sql (under setup_lock.sql). The active relay holds the
-- slot's advisory lock on its replication connection and, besides, this
-- lease: a token and an expiry that it renews every third of
-- Config.LeaderLease on its pool. A standby that finds the lease expired
-- while the lock is still held (the active relay hangs: stopped, a stalled
-- disk, a partition) takes the lease and terminates the holder's
-- walsender, which frees the lock and the slot. Every record of the
-- active relay (record.sql, check.sql) runs only while the lease carries
-- its token: a relay that lost the lead writes nothing.
CREATE TABLE IF NOT EXISTS {{schema}}.outbox_cdc_leases (
    slot_name  text        PRIMARY KEY,
    owner      text,
    -- NULL once the relay that held it stopped cleanly (lease_release.sql).
    token      uuid,
    expires_at timestamptz
);

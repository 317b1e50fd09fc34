-- The lease of the active relay of each slot, created by every relay at
-- start like setup.sql (under setup_lock.sql). The active relay holds the
-- slot's advisory lock on its replication connection and, besides, this
-- lease: a token and an expiry that it renews every third of
-- Config.LeaderLease on its pool. A standby that finds the lease expired
-- while the backend it records still holds the lock or the slot (the
-- active relay hangs: stopped, a stalled disk, a partition) takes the
-- lease and terminates that backend, which frees the lock and the slot.
-- Every record of the active relay (record.sql, check.sql) runs only while
-- the lease carries its token: a relay that lost the lead writes nothing.
CREATE TABLE IF NOT EXISTS {{schema}}.outbox_cdc_leases (
    slot_name    text        PRIMARY KEY,
    owner        text,
    -- NULL once the relay that held it stopped cleanly (lease_release.sql).
    token        uuid,
    expires_at   timestamptz,
    -- The holder's replication connection (backend_self.sql): the backend
    -- that holds the advisory lock and streams from the slot, named by its
    -- pid and its start (microseconds since the epoch), since a pid is
    -- reused. The only backend a takeover terminates (lease_holder.sql).
    holder_pid   integer,
    holder_start bigint
);

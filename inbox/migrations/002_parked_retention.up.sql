-- Used by Inbox.Cleanup (queries/cleanup_replayed.sql): replayed parked
-- entries, the oldest replay first, in bounded batches.
CREATE INDEX inbox_parked_replayed_at
    ON {{schema}}.inbox_parked (replayed_at)
    WHERE replayed_at IS NOT NULL;

-- Used by Inbox.Cleanup with Config.ParkedRetention
-- (queries/cleanup_parked.sql): entries never replayed, the oldest first.
CREATE INDEX inbox_parked_parked_at
    ON {{schema}}.inbox_parked (parked_at)
    WHERE replayed_at IS NULL;

-- Used by SQLiteInbox.Cleanup (queries/cleanup_replayed.sql): replayed
-- parked entries, the oldest replay first, in bounded batches.
CREATE INDEX "{{prefix}}inbox_parked_replayed_at"
    ON "{{prefix}}inbox_parked" (replayed_at)
    WHERE replayed_at IS NOT NULL;

-- Used by SQLiteInbox.Cleanup with SQLiteConfig.ParkedRetention
-- (queries/cleanup_parked.sql): entries never replayed, the oldest first.
CREATE INDEX "{{prefix}}inbox_parked_parked_at"
    ON "{{prefix}}inbox_parked" (parked_at)
    WHERE replayed_at IS NULL;

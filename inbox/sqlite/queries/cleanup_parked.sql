-- SQLiteInbox.Cleanup with SQLiteConfig.ParkedRetention: delete one batch
-- of parked entries never replayed and parked longer than the retention
-- ago, the oldest first. The inner SELECT walks
-- <prefix>inbox_parked_parked_at and stops after LIMIT. Each batch is its
-- own short write.
--
-- ?1 retention in milliseconds, ?2 batch size.
DELETE FROM "{{prefix}}inbox_parked"
WHERE rowid IN (
    SELECT rowid
    FROM "{{prefix}}inbox_parked"
    WHERE replayed_at IS NULL AND parked_at < {{now_ms}} - ?1
    ORDER BY parked_at
    LIMIT ?2
)

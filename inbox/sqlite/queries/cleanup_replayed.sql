-- SQLiteInbox.Cleanup: delete one batch of parked entries replayed longer
-- than SQLiteConfig.ReplayedRetention ago, the oldest replay first. The
-- inner SELECT walks <prefix>inbox_parked_replayed_at and stops after
-- LIMIT. Each batch is its own short write.
--
-- ?1 retention in milliseconds, ?2 batch size.
DELETE FROM "{{prefix}}inbox_parked"
WHERE rowid IN (
    SELECT rowid
    FROM "{{prefix}}inbox_parked"
    WHERE replayed_at < {{now_ms}} - ?1
    ORDER BY replayed_at
    LIMIT ?2
)

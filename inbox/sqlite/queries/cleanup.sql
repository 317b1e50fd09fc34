-- SQLiteInbox.Cleanup: delete one batch of processed ids older than the
-- retention, oldest first. The inner SELECT walks
-- <prefix>inbox_processed_processed_at and stops after LIMIT. Each batch is its
-- own short write, so that the application's writers wait for the lock at
-- most one batch long.
--
-- ?1 retention in milliseconds, ?2 batch size.
DELETE FROM "{{prefix}}inbox_processed"
WHERE rowid IN (
    SELECT rowid
    FROM "{{prefix}}inbox_processed"
    WHERE processed_at < {{now_ms}} - ?1
    ORDER BY processed_at
    LIMIT ?2
)

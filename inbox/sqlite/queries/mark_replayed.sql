-- SQLiteInbox.Replay: mark a parked entry replayed, inside the transaction
-- that applied it (or afterwards, when it was found already applied). A
-- second replay keeps the first time.
--
-- ?1 id.
UPDATE "{{prefix}}inbox_parked"
SET replayed_at = {{now_ms}}
WHERE id = ?1 AND replayed_at IS NULL

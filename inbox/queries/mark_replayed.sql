-- Inbox.Replay: mark a parked entry replayed, inside the transaction that
-- applied it (or afterwards, when it was found already applied). A second
-- replay keeps the first time.
--
-- $1 id.
UPDATE {{schema}}.inbox_parked
SET replayed_at = now()
WHERE id = $1 AND replayed_at IS NULL

-- Ops.Republish: record progress after a published batch; finished marks
-- the run complete.
--
-- $1 name, $2 last seq published, $3 messages published in the batch,
-- $4 finished.
UPDATE {{schema}}.outbox_republish_cursors
SET last_seq = $2,
    published = published + $3,
    updated_at = now(),
    finished_at = CASE WHEN $4::bool THEN now() ELSE finished_at END
WHERE name = $1

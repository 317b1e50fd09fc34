-- Cursor mode: what the leader handled above its position, so that a new
-- leader does not publish it again.
--
-- The position only moves over seqs that are handled (acknowledged by the
-- broker, or in the table path) and gaps that can no longer fill; one seq
-- still in a gap (a rolled-back transaction keeps a gap open for at least a
-- second, a long one as long as it runs) holds it, however many messages
-- above it were acknowledged. A leader that died used to leave all of those
-- to its successor, which published them again, and a successor that died
-- soon after left them to the next one. Now each save also records the
-- leader's head and the ranges of seqs at or below it that were not handled
-- yet (read but not acknowledged, or in a gap): every other seq in
-- (position, handled_head] was handled. A new leader starts with those
-- ranges as gaps to read again and everything else in them as done.
--
-- NULL handled_head: nothing known above the position (the leader had more
-- ranges than a save records, or cursor mode was just enabled). The ranges
-- stay true as the position moves: a handled seq stays handled.
ALTER TABLE {{schema}}.outbox_cursor
    ADD COLUMN handled_head bigint,
    ADD COLUMN unhandled_lo bigint[],
    ADD COLUMN unhandled_hi bigint[];

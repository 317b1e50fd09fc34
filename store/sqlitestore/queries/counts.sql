-- Store.Counts: messages per status. This reads the whole table (no index
-- covers every status), so it costs as much as the table is large; it is
-- meant for operators' status checks, not for a hot path.
SELECT status, count(*)
FROM "{{prefix}}messages"
GROUP BY status

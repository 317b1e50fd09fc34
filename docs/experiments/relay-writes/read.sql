-- Cursor mode, simplified: read up to 100 rows from a position; nothing is written.
SELECT coalesce(max(seq) + 1, :floor) AS floor, sum(length(payload)) AS bytes
FROM (SELECT seq, payload FROM outbox_messages WHERE seq >= :floor ORDER BY seq LIMIT 100) s
\gset

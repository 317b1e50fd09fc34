-- Ops.Stats with Config.ExactSentCount (or before the statistics first
-- counted the table): counts the QUEUED messages the cursor passed, which
-- are SENT. A range scan of the primary key (seq) up to the position, so it
-- costs in proportion to the history below it, as stats_sent_exact.sql
-- does: for occasional checks, not for every scrape.
--
-- $1 the cursor's position (stats_cursor.sql).
SELECT count(*)
FROM {{schema}}.outbox_messages m
WHERE m.seq <= $1::bigint
  AND m.status = 'QUEUED'

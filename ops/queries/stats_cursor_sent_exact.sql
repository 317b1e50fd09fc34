-- Ops.Stats with Config.ExactSentCount (or before the statistics first
-- counted the table): counts the messages of cursor mode the cursor passed
-- (outbox_message_states: SENT, by_cursor). A range scan of the primary key
-- up to the position, so it costs in proportion to the history below it,
-- as stats_sent_exact.sql does: for occasional checks, not for every
-- scrape.
SELECT count(*)
FROM {{schema}}.outbox_message_states(ARRAY['SENT'], true) s

-- Ops.Stats with Config.ExactSentCount: counts the SENT messages that
-- claims marked (outbox_message_states: SENT, not by_cursor; those of cursor
-- mode are stats_cursor_sent_exact.sql's). It reads outbox_messages_sent,
-- or the table when that is cheaper, so it costs in proportion to the SENT
-- history: for occasional checks, not for every scrape.
SELECT count(*)
FROM {{schema}}.outbox_message_states(ARRAY['SENT'], false) s

-- Ops.Stats with Config.ExactSentCount: counts the SENT messages. An index
-- only scan of outbox_messages_sent at best, so it costs in proportion to
-- the SENT history: for occasional checks, not for every scrape.
SELECT count(*)
FROM {{schema}}.outbox_messages
WHERE status = 'SENT'

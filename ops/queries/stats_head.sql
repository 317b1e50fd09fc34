-- Ops.Stats: the database clock, when the oldest unsent message was created,
-- and how many messages were marked SENT in the last minute.
--
-- The oldest unsent message is the first in seq order among PENDING, FAILED
-- and IN_FLIGHT: one step into the partial index outbox_messages_due (seq
-- follows creation order up to the few microseconds between concurrent
-- inserts). The last minute's SENT messages are a range scan at the right
-- end of outbox_messages_sent.
SELECT now(),
       (SELECT created_at
        FROM {{schema}}.outbox_messages
        WHERE status IN ('PENDING', 'FAILED', 'IN_FLIGHT')
        ORDER BY seq
        LIMIT 1),
       (SELECT count(*)
        FROM {{schema}}.outbox_messages
        WHERE status = 'SENT'
          AND published_at >= now() - interval '1 minute')

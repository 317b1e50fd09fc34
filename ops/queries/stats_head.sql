-- Ops.Stats: the database clock, when the oldest unsent message was created
-- (by a claim, and of cursor mode), and how many messages were marked SENT
-- in the last minute.
--
-- The oldest unsent message is the first in seq order (seq follows creation
-- order up to the few microseconds between concurrent inserts) among the
-- PENDING, FAILED and IN_FLIGHT ones: one step into outbox_messages_due,
-- and, for those of cursor mode, one step along the primary key from the
-- cursor's position. Asked apart, each is a scan in seq order that stops
-- at its first row; asked together, the two arms would be read whole and
-- sorted. The last minute's SENT messages are a range scan at the right
-- end of outbox_messages_sent (cursor mode records no publish time).
SELECT now(),
       (SELECT s.created_at
        FROM {{schema}}.outbox_message_states(ARRAY['PENDING', 'FAILED', 'IN_FLIGHT'], false) s
        ORDER BY s.seq
        LIMIT 1),
       (SELECT s.created_at
        FROM {{schema}}.outbox_message_states(ARRAY['PENDING'], true) s
        ORDER BY s.seq
        LIMIT 1),
       (SELECT count(*)
        FROM {{schema}}.outbox_message_states(ARRAY['SENT'], false) s
        WHERE s.published_at >= now() - interval '1 minute')

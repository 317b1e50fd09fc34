-- Store.Counts: messages per state, as outbox_message_states (migration 016)
-- defines it (QUEUED messages of cursor mode are SENT or PENDING by the
-- cursor's saved position, leased PENDING and FAILED ones IN_FLIGHT). This
-- reads the whole table (no index covers SENT rows), so it costs as much as
-- the table is large; it is meant for operators' status checks, not for a
-- hot path.
SELECT m.state, count(*)
FROM {{schema}}.outbox_message_states() m
GROUP BY m.state

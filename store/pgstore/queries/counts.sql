-- Store.Counts: messages per status. This reads the whole table (no index
-- covers SENT rows), so it costs as much as the table is large; it is meant
-- for operators' status checks, not for a hot path. QUEUED messages (cursor
-- mode) count as SENT or PENDING by the cursor's saved position, as in
-- get.sql, and leased PENDING and FAILED ones as IN_FLIGHT.
SELECT CASE WHEN m.status IN ('PENDING', 'FAILED') AND m.lease_token IS NOT NULL THEN 'IN_FLIGHT'
            WHEN m.status <> 'QUEUED' THEN m.status
            WHEN m.seq <= (SELECT c.position FROM {{schema}}.outbox_cursor c) THEN 'SENT'
            ELSE 'PENDING' END,
       count(*)
FROM {{schema}}.outbox_messages m
GROUP BY 1

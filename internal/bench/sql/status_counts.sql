-- Messages per status, to check that a drain left every message SENT. A
-- QUEUED message (cursor mode) is SENT once the cursor's saved position
-- passed it.
SELECT CASE WHEN m.status <> 'QUEUED' THEN m.status
            WHEN m.seq <= (SELECT c.position FROM {{schema}}.outbox_cursor c) THEN 'SENT'
            ELSE 'QUEUED' END,
       count(*)
FROM {{schema}}.outbox_messages m
GROUP BY 1

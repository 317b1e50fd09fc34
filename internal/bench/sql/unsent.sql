-- The backlog: messages not yet sent (or dead). Uses the partial index
-- outbox_messages_due, so it reads the backlog, not the history; in cursor
-- mode also the QUEUED messages above the cursor's saved position (a range
-- scan of the primary key).
SELECT (SELECT count(*)
        FROM {{schema}}.outbox_messages
        WHERE status IN ('PENDING', 'FAILED', 'IN_FLIGHT'))
     + (SELECT count(*)
        FROM {{schema}}.outbox_messages
        WHERE seq > (SELECT c.position FROM {{schema}}.outbox_cursor c)
          AND status = 'QUEUED')

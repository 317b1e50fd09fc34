-- The backlog: messages not yet sent (or dead), by their state
-- (outbox_message_states, pgstore's migration 016), which reads them
-- through outbox_messages_due and, in cursor mode, the primary key above
-- the cursor's saved position: the backlog, not the history.
SELECT count(*)
FROM {{schema}}.outbox_message_states(ARRAY['PENDING', 'FAILED', 'IN_FLIGHT']) m

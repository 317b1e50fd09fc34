-- Messages per state (outbox_message_states, pgstore's migration 016), to
-- check that a drain left every message SENT. A message of cursor mode is
-- SENT once the cursor's saved position passed it, PENDING before.
SELECT m.state, count(*)
FROM {{schema}}.outbox_message_states m
GROUP BY m.state

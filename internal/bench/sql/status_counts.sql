-- Messages per status, to check that a drain left every message SENT.
SELECT status, count(*) FROM {{schema}}.outbox_messages GROUP BY status

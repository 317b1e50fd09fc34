-- Keeps autovacuum (and auto-analyze) away from the outbox table, so that
-- dead tuples stay where a mass mark left them while claims are timed.
ALTER TABLE {{schema}}.outbox_messages SET (autovacuum_enabled = false)

-- Store.Mode: the outbox's relay mode, recorded by migration 017 and
-- changed by Store.SetMode. No row, or no table (an outbox before 017):
-- Store.Mode derives the mode as the migration does (mode_tables.sql).
SELECT m.mode, m.changed_at, m.changed_by
FROM {{schema}}.outbox_relay_mode m

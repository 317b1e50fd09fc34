-- EnableCursor / DisableCursor: whether migration 010 created outbox_cursor
-- (cursor_check.sql reads it, and would fail without it).
SELECT to_regclass('{{schema}}.outbox_cursor') IS NOT NULL

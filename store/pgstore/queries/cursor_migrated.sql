-- EnableCursor / DisableCursor: whether migration 010 created outbox_cursor
-- (cursor_check.sql reads it, and would fail without it) and migration 011
-- added the columns a leader saves.
SELECT to_regclass('{{schema}}.outbox_cursor') IS NOT NULL
   AND EXISTS (SELECT 1 FROM pg_attribute
               WHERE attrelid = to_regclass('{{schema}}.outbox_cursor')
                 AND attname = 'handled_head' AND NOT attisdropped)

-- EnableCursor / DisableCursor: the first of the migrations cursor mode
-- needs that is missing, or 0 when none is: 1 when the schema has no
-- outbox_messages (not migrated at all), 10 creates outbox_cursor
-- (cursor_check.sql reads it, and would fail without it), 11 adds the
-- columns a leader saves, 12 the trigger that gives every inserting
-- transaction its id before its seqs (without it, a writer's own INSERT
-- could be passed while still open).
SELECT CASE
    WHEN to_regclass('{{schema}}.outbox_messages') IS NULL THEN 1
    WHEN to_regclass('{{schema}}.outbox_cursor') IS NULL THEN 10
    WHEN NOT EXISTS (SELECT 1 FROM pg_attribute
                     WHERE attrelid = to_regclass('{{schema}}.outbox_cursor')
                       AND attname = 'handled_head' AND NOT attisdropped) THEN 11
    WHEN NOT EXISTS (SELECT 1 FROM pg_trigger
                     WHERE tgrelid = to_regclass('{{schema}}.outbox_messages')
                       AND tgname = 'outbox_messages_xact_id') THEN 12
    ELSE 0
END

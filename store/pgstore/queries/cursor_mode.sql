-- Whether the outbox is in cursor mode: a Store's first claim, and a claim
-- in claim mode now and then (cursor_state.sql tries to lead as well).
SELECT coalesce((SELECT active FROM {{schema}}.outbox_cursor), false)

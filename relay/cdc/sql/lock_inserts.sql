-- Block inserts into the outbox table until the setup transaction ends, and
-- wait for the transactions inserting now to end (SHARE conflicts with the
-- ROW EXCLUSIVE lock an insert takes): so that every message committed
-- before the publication changes is visible to defer_unsent.sql, and every
-- message committed after it is published under the new setting.
LOCK TABLE {{schema}}.outbox_messages IN SHARE MODE

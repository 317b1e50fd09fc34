-- Inbox.Cleanup: delete one batch of processed ids older than the
-- retention. The CTE walks inbox_processed_processed_at from the oldest id
-- and stops after LIMIT; SKIP LOCKED passes over rows a running cleanup
-- holds. Each batch is its own short autocommit statement.
--
-- $1 retention in microseconds, $2 batch size.
WITH old AS (
    SELECT consumer, message_id
    FROM {{schema}}.inbox_processed
    WHERE processed_at < now() - $1::bigint * interval '1 microsecond'
    ORDER BY processed_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
DELETE FROM {{schema}}.inbox_processed p
USING old
WHERE p.consumer = old.consumer AND p.message_id = old.message_id

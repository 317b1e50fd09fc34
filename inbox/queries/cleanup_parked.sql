-- Inbox.Cleanup with Config.ParkedRetention: delete one batch of parked
-- entries never replayed and parked longer than the retention ago. The CTE
-- walks inbox_parked_parked_at from the oldest entry and stops after
-- LIMIT; SKIP LOCKED passes over rows a running cleanup or replay holds.
-- Each batch is its own short autocommit statement.
--
-- $1 retention in microseconds, $2 batch size.
WITH old AS (
    SELECT id
    FROM {{schema}}.inbox_parked
    WHERE replayed_at IS NULL
      AND parked_at < now() - $1::bigint * interval '1 microsecond'
    ORDER BY parked_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
DELETE FROM {{schema}}.inbox_parked p
USING old
WHERE p.id = old.id

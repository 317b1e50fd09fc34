-- Inbox.Cleanup: delete one batch of parked entries replayed longer than
-- Config.ReplayedRetention ago. The CTE walks inbox_parked_replayed_at from
-- the oldest replay and stops after LIMIT; SKIP LOCKED passes over rows a
-- running cleanup holds. Each batch is its own short autocommit statement.
--
-- $1 retention in microseconds, $2 batch size.
WITH old AS (
    SELECT id
    FROM {{schema}}.inbox_parked
    WHERE replayed_at < now() - $1::bigint * interval '1 microsecond'
    ORDER BY replayed_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
DELETE FROM {{schema}}.inbox_parked p
USING old
WHERE p.id = old.id

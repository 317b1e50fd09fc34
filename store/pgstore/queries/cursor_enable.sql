-- EnableCursor, after cursor_check.sql, in its transaction: new messages
-- are QUEUED from now on, and the cursor starts above every seq taken so
-- far. The ALTER takes an ACCESS EXCLUSIVE lock on outbox_messages for a
-- moment (it does not rewrite the table; on a partitioned table it recurses
-- to the partitions): it waits for the transactions that enqueued before,
-- so every row with a seq at or below the start is from before and stays
-- with the table path, and every later one is QUEUED. Enqueues wait behind
-- the lock meanwhile.
ALTER TABLE {{schema}}.outbox_messages ALTER COLUMN status SET DEFAULT 'QUEUED';

INSERT INTO {{schema}}.outbox_cursor (position)
SELECT greatest(
    coalesce(pg_sequence_last_value(pg_get_serial_sequence('{{schema}}.outbox_messages', 'seq')::regclass), 0),
    coalesce((SELECT max(seq) FROM {{schema}}.outbox_messages), 0))
ON CONFLICT (one) DO UPDATE
SET active = true,
    position = greatest(outbox_cursor.position, EXCLUDED.position),
    lease_owner = NULL,
    lease_token = NULL,
    lease_expires_at = NULL,
    saved_at = now(),
    enabled_at = now(),
    handled_head = NULL,
    unhandled_lo = NULL,
    unhandled_hi = NULL;

-- Statistics for the one row, so that the planner does not assume a table of
-- hundreds of rows where a query reads the cursor's row.
ANALYZE {{schema}}.outbox_cursor;

-- The table path's release, first statement (tableQueue.release): deletes
-- the deferred aggregates that have nothing unsent in this statement's
-- snapshot, so that their next messages go through the stream again, and
-- returns them. The transaction stays open for table_release_keep.sql,
-- which judges them again in a later snapshot and puts back those that
-- have an unsent message by then.
DELETE FROM {{schema}}.outbox_cdc_deferred d
WHERE NOT EXISTS (
    SELECT 1 FROM {{schema}}.outbox_messages e
    WHERE e.aggregate_type = d.aggregate_type
      AND e.aggregate_id = d.aggregate_id
      AND e.status IN ('PENDING', 'FAILED', 'IN_FLIGHT', 'DEAD_LETTER'))
RETURNING d.aggregate_type, d.aggregate_id, d.deferred_at, d.reason

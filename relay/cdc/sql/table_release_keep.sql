-- The table path's release, second statement (tableQueue.release), in the
-- transaction of table_release.sql and a snapshot taken after its delete:
-- puts back, as they were, the aggregates it deleted that have an unsent
-- message now. Uses outbox_messages_unsent_by_aggregate.
--
-- $1 aggregate types, $2 aggregate ids, $3 deferred at, $4 reasons: the
-- rows table_release.sql returned.
INSERT INTO {{schema}}.outbox_cdc_deferred (aggregate_type, aggregate_id, deferred_at, reason)
SELECT r.aggregate_type, r.aggregate_id, r.deferred_at, r.reason
FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::text[]) AS r (aggregate_type, aggregate_id, deferred_at, reason)
WHERE EXISTS (
    SELECT 1 FROM {{schema}}.outbox_messages e
    WHERE e.aggregate_type = r.aggregate_type
      AND e.aggregate_id = r.aggregate_id
      AND e.status IN ('PENDING', 'FAILED', 'IN_FLIGHT', 'DEAD_LETTER'))
ON CONFLICT DO NOTHING

-- The columns of a cursor read (cursor_read.sql inserts this list twice, for
-- its gap part and its head part, with m the outbox_messages row).
--
-- blocked: whether an earlier message of the aggregate is in the table path
-- (PENDING, FAILED, IN_FLIGHT or DEAD_LETTER), a probe of
-- outbox_messages_unsent_by_aggregate. In cursor mode that index holds only
-- table-path messages and is usually empty, so the uncorrelated EXISTS
-- (evaluated once per read, an InitPlan) asks first, and the probe per row
-- runs only when it found something.
m.seq, m.status, m.id, m.aggregate_type, m.aggregate_id, m.event_type, m.event_version,
m.topic, m.payload, m.content_type,
CASE WHEN m.headers = '{}'::jsonb THEN NULL ELSE m.headers::text END AS headers,
m.correlation_id, m.causation_id, m.traceparent, m.created_at,
CASE WHEN m.status = 'QUEUED'
      AND EXISTS (SELECT 1
                  FROM {{schema}}.outbox_messages t
                  WHERE t.status IN ('PENDING', 'FAILED', 'IN_FLIGHT', 'DEAD_LETTER'))
     THEN EXISTS (
         {{earlier_unsent}}
         -- A probe per row, whatever the statistics say (see
         -- claim_floor.sql).
         OFFSET 0)
     ELSE false END AS blocked

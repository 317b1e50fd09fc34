-- Cursor mode (cursor.go), the leader's read: in one statement, so in one
-- snapshot, the snapshot's xmin and xmax, the visible rows inside the
-- window's gaps, and the next rows above its head. No lock, no write.
--
-- Both parts are range scans of the primary key (seq). The columns are
-- what a publish needs and nothing of the relay state, which a QUEUED row
-- does not have; headers are NULL when empty, so that the common case
-- decodes no JSON. blocked asks outbox_messages_unsent_by_aggregate (which
-- holds only table-path rows in cursor mode, so it is small) whether an
-- earlier message of the aggregate waits in the table path; if so, this
-- one must wait behind it there.
--
-- $1 the head (read above it), $2 how many rows above it,
-- $3 and $4 the gaps' lowest and highest seqs, $5 how many rows inside
-- them.
WITH snap AS MATERIALIZED (
    SELECT pg_current_snapshot() AS s
)
SELECT pg_snapshot_xmin(snap.s)::text, pg_snapshot_xmax(snap.s)::text,
       r.gap, r.seq, r.status, r.id, r.aggregate_type, r.aggregate_id, r.event_type,
       r.event_version, r.topic, r.payload, r.content_type, r.headers, r.correlation_id,
       r.causation_id, r.traceparent, r.created_at, r.blocked
FROM snap
LEFT JOIN LATERAL (
    (SELECT true AS gap, m.*
     FROM unnest($3::bigint[], $4::bigint[]) AS g (lo, hi)
     CROSS JOIN LATERAL (
         SELECT {{cursor_columns}}
         FROM {{schema}}.outbox_messages m
         WHERE m.seq BETWEEN g.lo AND g.hi
         -- A range scan of the primary key per gap: without the fence the
         -- planner may flatten this into one scan of the whole index.
         OFFSET 0
     ) m
     ORDER BY m.seq
     LIMIT $5)
    UNION ALL
    (SELECT false AS gap, {{cursor_columns}}
     FROM {{schema}}.outbox_messages m
     WHERE m.seq > $1
     ORDER BY m.seq
     LIMIT $2)
) r ON true

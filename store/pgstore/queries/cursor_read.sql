-- Cursor mode (relay/cursor plans it, cursortrip.go sends it), the leader's read: in one statement, so in one
-- snapshot, a first row with the snapshot's xmin and the bound of the gaps
-- this read finds, then the visible rows inside the window's gaps, then the
-- next rows above its head. No lock.
--
-- The bound is a transaction id given to this transaction while the
-- statement runs, after its snapshot was taken: higher than the id of every
-- transaction that had one when the snapshot was taken, so once a later
-- snapshot's xmin reaches it, all of those have ended. The snapshot's own
-- xmax would not do: it is the newest ended id plus one, and a transaction
-- still running with a newer id is below neither it nor xmin (a message was
-- lost that way). It costs the read a transaction id and a commit record
-- (an asynchronous commit, see relay_settings.sql). The read must therefore
-- be the first statement of its round trip's transaction that takes an id:
-- after a write (the save, a mark, a claim) the id would be that write's,
-- taken before writers that got theirs while it ran (another loss, now
-- tested by TestCursor_AWriterThatGotItsIDDuringTheSaveHoldsThePosition).
--
-- Both parts are range scans of the primary key (seq): one per gap, one
-- above the head. The columns are what a publish needs and nothing of the
-- relay state, which a QUEUED row does not have; headers are NULL when
-- empty, so that the common case decodes no JSON. blocked says that an
-- earlier message of the row's aggregate waits in the table path, so that
-- this one must follow it there; see cursor_columns.sql.
--
-- $1 the head (read above it), $2 how many rows above it,
-- $3 and $4 the gaps' lowest and highest seqs, $5 how many rows inside
-- them.
SELECT true AS snapshot, pg_snapshot_xmin(pg_current_snapshot())::text, pg_current_xact_id()::text,
       NULL::bool, NULL::bigint, NULL::text, NULL::uuid, NULL::text, NULL::text, NULL::text, NULL::int,
       NULL::text, NULL::bytea, NULL::text, NULL::text, NULL::text, NULL::text, NULL::text,
       NULL::timestamptz, NULL::bool
UNION ALL
(SELECT false, NULL, NULL, true AS gap, m.*
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
(SELECT false, NULL, NULL, false AS gap, {{cursor_columns}}
 FROM {{schema}}.outbox_messages m
 WHERE m.seq > $1
 ORDER BY m.seq
 LIMIT $2)

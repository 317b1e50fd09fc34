-- Sent first, in the same round trip and the same implicit transaction, with
-- every statement of the relay (claims, marks, failures, releases, the floor
-- probe; see queue.go). The settings last until that transaction ends, so
-- nothing leaks to other users of the pooled connection.
--
-- synchronous_commit: $1 'off' unless Config.SynchronousRelayCommits. The
-- relay's commits then do not wait for their WAL flush, so they do not add
-- flushes that the application's commits wait behind. A claim or mark lost
-- in a database crash only means that the message is published again
-- (at-least-once), and WAL is flushed in order, so no later durable commit
-- (another relay's claim of the aggregate's next message, say) can survive
-- a lost earlier mark. The fence (the lease token) is unaffected.
--
-- enable_bitmapscan: the claim must walk outbox_messages_due in seq order
-- and stop after LIMIT rows. With stale statistics (a backlog that arrived
-- after the last ANALYZE) the planner prefers a bitmap scan of the whole
-- index plus a sort, which reads every entry, dead ones included, on every
-- claim.
--
-- enable_seqscan: every relay statement finds its rows through an index
-- (outbox_messages_due, outbox_messages_unsent_by_aggregate, the primary
-- key). pgx prepares its statements, and after five executions PostgreSQL
-- may keep a generic plan made from the statistics of that moment. Made
-- while the table was empty or small (a new deployment, a table never
-- analyzed), that plan checks "nothing earlier of the aggregate is unsent"
-- with a sequential scan of the whole table per candidate, and keeps doing
-- so after the table grew, until the next ANALYZE: on the test machine a
-- claim of 100 took over a second with 20,000 rows, and the relay fell
-- behind 8 writers it should have kept up with. With sequential scans
-- priced out, the plan is index-driven whatever the statistics say.
--
-- jit: the relay's statements are short, and a plan that must use a
-- sequential scan anyway (the one row of outbox_cursor, the small
-- outbox_idle_relays) carries enable_seqscan's penalty in its cost, far
-- above jit_above_cost: PostgreSQL then compiled the statement, which took
-- 100-200 ms for a single-row UPDATE on the test machine.
--
-- plan_cache_mode: with the two settings above the plans are index-driven
-- whatever the statistics, so one generic plan per prepared statement
-- serves every execution. Without it PostgreSQL may plan each execution
-- anew (a custom plan), and planning the cursor read (cursor_read.sql) took
-- ten times as long as running it.
SELECT set_config('synchronous_commit', $1::text, true),
       set_config('enable_bitmapscan', 'off', true),
       set_config('enable_seqscan', 'off', true),
       set_config('jit', 'off', true),
       set_config('plan_cache_mode', 'force_generic_plan', true)

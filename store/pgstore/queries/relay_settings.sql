-- Sent first, in the same round trip and the same implicit transaction, with
-- every statement of the relay (claims, marks, release; see queue.go). Both
-- settings last until that transaction ends, so nothing leaks to other users
-- of the pooled connection.
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
SELECT set_config('synchronous_commit', $1::text, true),
       set_config('enable_bitmapscan', 'off', true)

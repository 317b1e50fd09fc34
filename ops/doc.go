// Package ops is the operators' toolkit for a PostgreSQL outbox, as a Go
// API: statistics, the dead-letter tools, republishing of sent events, and
// retention. The "outbox stats", "outbox dlq", "outbox replay" and
// "outbox cleanup" commands are thin layers over it, and the metrics and
// status pages read [Ops.Stats].
//
// # Setting up
//
// ops works on the tables that pgstore's Migrate creates:
//
//	o, err := ops.New(pool, ops.Config{Schema: "outbox"})
//	...
//	s, err := o.Stats(ctx)
//	...
//	fmt.Println(s.Counts[outbox.StatusPending], s.OldestUnsentAge, s.BlockedAggregates)
//	groups, err := o.DeadLetterGroups(ctx, ops.Filter{}) // the dead letters by cause, most first
//	...
//	// once the cause of groups[0] is fixed:
//	res, err := o.Replay(ctx, ops.Request{Reason: "topic created", Filter: &ops.Filter{Group: groups[0].Key}})
//
// # Statistics
//
// [Ops.Stats] reads, in one round trip (two in cursor mode), the messages
// per state, the age of the oldest unsent message, the aggregates blocked
// by a dead letter, the event types that fail most, how many messages were
// sent in the last minute, and in cursor mode the cursor's state. Every
// figure comes from a partial index or from the unsent rows, so a scrape
// costs in proportion to the backlog, not to the table; the SENT count is
// PostgreSQL's estimate, except on a small table (below
// Config.ExactCountBelow rows, 100,000 by default), where it is counted,
// and with Config.ExactSentCount. [StatsCache] shares one snapshot among
// any number of readers (metrics scrapes, status page views), so that
// together they read at most once per interval.
//
// # Dead letters
//
// A dead letter blocks the later messages of its aggregate (the relay keeps
// per-aggregate order). [Ops.DeadLetterGroups] groups them by cause (error
// class, topic, event type: an incident is usually one group),
// [Ops.DeadLetters] lists them, [Ops.DeadLetter] shows one with its payload,
// headers and every attempt's error, and then:
//
//   - [Ops.Replay] puts them back to PENDING with their attempts reset; the
//     relay publishes them and the messages behind them, in order.
//   - [Ops.Discard] gives up on them: they become DISCARDED (kept, with the
//     reason in the audit log) and their aggregates flow again.
//
// By id, both change either every message they are given or none, and
// record who, when, why and which messages in the audit log ([Ops.Audit])
// in the same transaction. By group (Filter.Group) or filter they work
// through the selection in batches, each a transaction with its audit
// entry, at a bounded rate (Request.BatchSize, Request.Rate), and
// keep each aggregate's order across batches.
//
// # Republishing sent events
//
// [Ops.Republish] publishes already SENT events again through a sink.Sink,
// with their original event ids, in seq order, rate limited, and resumable
// by name: consumers that deduplicate by event id stay correct, and a
// consumer that lost its state can rebuild it.
//
// # Retention
//
// [Ops.Cleanup] deletes SENT messages older than a cutoff in short, bounded
// batches that lock only the rows they delete, so the relay keeps
// publishing; it never deletes unsent messages or dead letters, and deletes
// discarded ones only when asked. [Ops.CleanupEvery] runs it periodically.
// See docs/operations.md for the runbook and for autovacuum settings.
//
// # Message states
//
// Every tool reads a message's state as pgstore's outbox_message_states
// (migration 016) defines it, the same that Store.Get reports: PENDING,
// IN_FLIGHT, FAILED, SENT, DEAD_LETTER or DISCARDED. Nothing in ops
// resolves what the relay stored (a lease, a message of cursor mode) on its
// own; the function reads each state through the index that holds it.
//
// # Cursor mode
//
// In cursor mode (pgstore's EnableCursor, "outbox cursor enable") the rows
// of new messages are not changed when they are published: one relay, the
// leader, reads them in seq order and saves its position. Such a message
// is SENT once the position passed it (seq <= position) and PENDING
// before; it has no published_at. Every tool treats it so: [Ops.Stats]
// counts the unsent ones as PENDING (and in the oldest unsent message's
// age) and the passed ones as SENT, and reports the cursor itself in
// [Stats].Cursor ([Ops.Cursor] reads only that: mode, position, leader,
// lease, lag); [Ops.Cleanup] deletes passed ones by their created_at;
// [Ops.MaintainPartitions] keeps a partition that holds an unsent one;
// [Ops.Republish] republishes passed ones. A message of cursor mode whose
// publish failed leaves cursor mode for the table path (FAILED,
// DEAD_LETTER, the later messages of its aggregate PENDING), where the
// dead-letter tools work as in claim mode.
package ops

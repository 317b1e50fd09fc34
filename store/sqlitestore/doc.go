// Package sqlitestore is the SQLite outbox store, on the pure-Go driver
// modernc.org/sqlite (no cgo) and database/sql. It writes messages inside
// the application's own transactions and implements [store.Queue] for the
// relay, with the same guarantees as the PostgreSQL store: both pass the
// conformance suite in package storetest.
//
// # Setting up
//
// Open the database file with [Open], which sets what an outbox needs (WAL
// mode, a busy timeout, write transactions that lock at BEGIN), use the
// returned *sql.DB for the application's tables too, and apply the
// migrations once at start-up:
//
//	db, err := sqlitestore.Open(ctx, "orders.db")
//	...
//	st, err := sqlitestore.New(db, sqlitestore.Config{})
//	...
//	err = st.Migrate(ctx)
//
// # Enqueueing
//
// Write the events in the same transaction as the business change. They are
// visible to the relay only if that transaction commits, and gone if it
// rolls back:
//
//	tx, err := db.BeginTx(ctx, nil)
//	...
//	defer tx.Rollback() // a no-op after Commit
//	_, err = tx.ExecContext(ctx, "UPDATE orders SET state = 'placed' WHERE id = ?", orderID)
//	...
//	err = st.Enqueue(ctx, tx, outbox.Message{
//		AggregateType: "Order",
//		AggregateID:   orderID,
//		EventType:     "OrderPlaced",
//		Payload:       payload,
//	})
//	...
//	err = tx.Commit()
//
// Enqueue validates every message first (see [outbox.Prepare]); an invalid
// one gives a *[outbox.ValidationError] and nothing is written.
//
// # Relaying
//
// Give the store to the relay, with a short poll interval:
//
//	r, err := relay.New(relay.Config{Store: st, Sink: sink, PollInterval: sqlitestore.PollInterval})
//
// SQLite has no LISTEN/NOTIFY, so the store does not implement
// [store.Notifier]: the relay finds new messages by polling, every
// [PollInterval] (100ms) in the line above. An idle poll is a write
// transaction that reads a little of one index and changes nothing, so it
// holds the write lock for microseconds.
//
// # One writer at a time
//
// SQLite lets one connection write at a time; in WAL mode readers go on
// meanwhile. The store leans on that instead of PostgreSQL's row locks:
//
//   - A claim is a short write transaction: a walk in seq order from the
//     first due message over a span of seqs (four times the batch, at least
//     256) for due heads of aggregates; when it finds too few and a message
//     beyond the span is due, a scan from aggregate to aggregate for the
//     heads beyond (at most as many aggregates, starting after the one the
//     store's last scan ended with); and one UPDATE that leases them. While
//     it runs no one else writes, so two claims never take the same
//     message; there is nothing to skip, and no FOR UPDATE SKIP LOCKED. Its
//     work, and so the time it holds the write lock, is bounded however the
//     backlog spreads over aggregates, even when a long backlog sits on a
//     few of them (BenchmarkClaim).
//   - With ClaimParams.MaxRun above 1 a claim leases runs: before the
//     UPDATE, for each head a range scan from the head's key over the
//     messages of its aggregate after it, which are its followers up to
//     the first that is not due (a failure waiting for its retry, another
//     claim's lease, a dead letter) or would take the run's payload beyond
//     ClaimParams.MaxRunBytes, at most MaxRun - 1. A run never skips a
//     message. The heads fill the batch first; the followers fill the rest
//     of ClaimParams.Limit rank by rank, every head's first follower before
//     any head's second. With MaxRun 0 or 1 a claim is of heads only.
//   - A message's seq is given out while its transaction holds the write
//     lock, so within an aggregate enqueue order is commit order, and the
//     relay publishes in that order. (PostgreSQL's late-commit caveat does
//     not arise.)
//   - MarkSent, MarkFailed, Release and each Cleanup batch are single
//     statements, each a write transaction of its own. Like the claim they
//     change a row only while it is IN_FLIGHT under the caller's lease
//     token (fencing).
//
// "database is locked" (SQLITE_BUSY) is what SQLite answers a writer that
// could not get the lock. [Open] makes it not happen under load: every
// read-write transaction takes the lock at BEGIN (a transaction that read
// first and wants to write later could not wait for it), waiting up to
// [BusyTimeout] for another process's writer, and the writers of one
// process queue for the lock in Go rather than in SQLite's polling busy
// handler, which under a steady stream of writes can starve a waiter. So a
// write fails only when another write transaction stays open for ten
// seconds. Keep transactions short, and never wait, inside one, for a write
// on another connection.
//
// # Time
//
// Times are stored as unix milliseconds, by the database clock (SQLite's
// 'now', which is the host's clock). Lease expiry and retry times are exact
// integer arithmetic on them.
//
// # Schema
//
// The tables are named with Config.TablePrefix (default "outbox_"), validated
// as a lower-case identifier prefix and quoted:
//
//   - outbox_messages: one row per message, a STRICT table. seq
//     (INTEGER PRIMARY KEY AUTOINCREMENT, never reused) orders messages; id
//     (unique, the UUID as text) is the event id; payload is a BLOB; headers
//     a JSON object whose values are strings; status is one of PENDING,
//     IN_FLIGHT, SENT, FAILED, DEAD_LETTER; attempts, next_attempt_at and
//     last_error drive retries; lease_owner, lease_token and
//     lease_expires_at are the relay's lease; published_at is set when the
//     broker acknowledged. Triggers (migration 002) abort an INSERT, or an
//     UPDATE of headers, whose headers are other JSON, with the error
//     "outbox_messages.headers must be a JSON object of string values". A
//     row written before that migration that breaks the rule is read with
//     [outbox.Record.Invalid] set, by the claim and [Store.Get] alike,
//     without failing the read of the rows beside it, and the relay
//     dead-letters it with that reason.
//   - outbox_migrations: the applied migration versions.
//
// Its partial indexes match PostgreSQL's, and each statement says which it
// uses:
//
//   - outbox_messages_due, on (seq) where status is PENDING, FAILED or
//     IN_FLIGHT: the claim's walk for due messages in seq order, in
//     proportion to its span, not to the table.
//   - outbox_messages_unsent_by_aggregate, on (aggregate_type,
//     aggregate_id, seq) where the status is not SENT: the claim's probe
//     "is there an earlier unsent message of this aggregate?", its scan
//     from one aggregate's head to the next, and a run's scan from a head
//     to its followers.
//   - outbox_messages_sent_by_published_at, on (published_at) where status
//     is SENT: [Store.Cleanup]'s oldest-first deletes.
//
// # Retention
//
// SENT rows stay until [Store.Cleanup] deletes them, for instance every
// hour: st.Cleanup(ctx, 7*24*time.Hour, 1000) deletes messages sent more
// than a week ago, a thousand per write transaction.
package sqlitestore

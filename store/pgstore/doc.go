// Package pgstore is the PostgreSQL outbox store, built on pgx v5. It
// writes messages inside the application's own transactions and implements
// [store.Queue] and [store.Notifier] for the relay: [Store] claims messages
// in claim mode, and [CursorDB] is the database side of the cursor
// strategy (package relay/cursor), which reads them in cursor mode.
//
// # Setting up
//
// Create a store on a pgx pool and apply the migrations once at start-up
// (the CLI's "outbox migrate" does the same):
//
//	pool, err := pgxpool.New(ctx, "postgres://app@db/app")
//	...
//	s, err := pgstore.New(pool, pgstore.Config{Schema: "outbox"})
//	...
//	err = s.Migrate(ctx)
//
// Migrate is idempotent and safe to run from several processes at once.
//
// # Enqueueing with pgx
//
// Write the events in the same transaction as the business change. They are
// visible to the relay only if that transaction commits, and gone if it
// rolls back:
//
//	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
//		if _, err := tx.Exec(ctx, "UPDATE orders SET state = 'placed' WHERE id = $1", orderID); err != nil {
//			return err
//		}
//		return s.Enqueue(ctx, tx, outbox.Message{
//			AggregateType: "Order",
//			AggregateID:   orderID,
//			EventType:     "OrderPlaced",
//			Payload:       []byte(`{"orderId":"` + orderID + `"}`),
//		})
//	})
//
// # Enqueueing with database/sql
//
// With database/sql, open the database with the pgx driver
// (import _ "github.com/jackc/pgx/v5/stdlib"; sql.Open("pgx", url)) and
// enqueue with [Store.SQL]: st.SQL().Enqueue(ctx, sqlTx, msgs...) runs the
// same statement. It is an [outbox.Enqueuer] of *sql.Tx, as a
// *sqlitestore.Store is, so that code written against that interface runs
// on PostgreSQL and SQLite alike.
//
// Both validate every message first (see [outbox.Prepare]); an invalid one
// gives a *[outbox.ValidationError] and nothing is written. All messages of
// one call are inserted with a single INSERT ... SELECT FROM unnest(...),
// one round trip however many there are.
//
// # Behind a connection pooler
//
// The store works through a pooler in transaction pooling mode (PgBouncer
// with pool_mode = transaction), where a server connection serves a client
// for one transaction only: nothing it does outlives a transaction. The
// relay's settings are set_config(..., true), every advisory lock is
// transaction-scoped, and cursor mode keeps its state in rows. Two things
// need configuring:
//
//   - pgx's query exec mode: default_query_exec_mode=exec (or
//     cache_describe, simple_protocol) in the database URL of the pool, as
//     of the application's own pool. pgx's default names its prepared
//     statements, which such a pooler does not keep (PgBouncer before 1.21,
//     or with max_prepared_statements = 0); the errors that causes wrap
//     [ErrTransactionPooler].
//   - no LISTEN: relay.Config.DisableListen. [Store.Notifications] returns
//     [ErrListenNotDelivered] when its test notification does not arrive.
//
// # Schema
//
// All objects live in Config.Schema (default "outbox"); queries are
// schema-qualified, so the connection's search_path does not matter. The
// schema name is validated as a lower-case identifier and quoted; it is
// filled into the embedded SQL once, in [New].
//
//   - outbox_messages: one row per message. seq (identity, primary key)
//     orders messages; id (unique) is the event id. status is one of
//     PENDING, IN_FLIGHT, SENT, FAILED, DEAD_LETTER, DISCARDED; attempts,
//     next_attempt_at and last_error drive retries; lease_owner,
//     lease_token and lease_expires_at are the relay's lease; published_at
//     is set when the broker acknowledged. DISCARDED (with discarded_at) is
//     a dead letter an operator gave up on: terminal, kept for audit, and
//     not blocking its aggregate.
//   - outbox_attempts: every counted failed attempt of a message (attempt
//     number, error, time), written by [Store.MarkFailed] in the statement
//     that marks the message.
//   - outbox_audit, outbox_republish_cursors: the operators' audit log and
//     the resumable cursors of republishing, used by package ops.
//   - outbox_topics: each relay's view of the topics it publishes to
//     (acknowledged records, and whether a topic can take records),
//     written every few seconds by the relay command (ops.ReportTopics) and
//     read by ops.Stats (migration 013).
//   - outbox_relay_mode: the outbox's relay mode, in one row (migration
//     017): claim, cursor or cdc, since when and who switched. [Store.Mode]
//     reads it and [Store.SetMode] switches it, with the steps each pair of
//     modes needs; EnableCursor and DisableCursor are that switch too. A
//     trigger on outbox_cursor keeps it and outbox_cursor.active, which the
//     relays read, in agreement.
//   - outbox_migrations: the applied migration versions.
//   - A statement-level AFTER INSERT trigger on outbox_messages that runs
//     pg_notify on channel "outbox_<schema>" while some relay is registered
//     as idle in the UNLOGGED table outbox_idle_relays ([Store.Idle],
//     [Store.Busy]); [Store.Notifications] LISTENs on it. NOTIFY serializes
//     commits database-wide, so writers pay for it only while a relay waits;
//     a relay working through a backlog is not notified. NOTIFY is
//     delivered at commit, so a relay wakes only for committed messages, and
//     outboxes in two schemas do not wake each other.
//   - A statement-level BEFORE INSERT trigger on outbox_messages that gives
//     the inserting transaction its id when it has none yet (migration
//     012), so that every INSERT, [Store.Enqueue]'s or a writer's own SQL,
//     has its transaction id before its rows take their seqs: cursor mode
//     relies on it to never pass a seq that may still commit.
//   - A row-level BEFORE INSERT OR UPDATE OF headers trigger,
//     outbox_messages_headers_are_strings (migration 015): headers must be
//     a JSON object whose values are strings. A writer with its own SQL
//     that writes other JSON gets a check violation (SQLSTATE 23514) with
//     that constraint name and an error saying which value is wrong, and
//     its transaction rolls back. The relay's updates of a row's state do
//     not fire it. A row written before the migration that breaks the rule
//     is read with [outbox.Record.Invalid] set (the claim, [Store.Get] and
//     [ScanRecord] read each row's headers on their own, so it fails no
//     read of the rows beside it), and the relay dead-letters it with that
//     reason. The function outbox_headers_are_strings(headers) finds such
//     rows.
//
// # Indexes
//
//   - outbox_messages_due, on (seq) where status is PENDING, FAILED or
//     IN_FLIGHT: the claim's scan for due messages in seq order. It is
//     partial, so the SENT rows a busy outbox accumulates are not in it and
//     a claim costs in proportion to the backlog, not to the table.
//   - outbox_messages_unsent_by_aggregate, on (aggregate_type,
//     aggregate_id, seq) where status is not SENT: the claim's probe "is
//     there an earlier unsent message of this aggregate?", which keeps each
//     aggregate in order, and the walk of a claim of runs from a head to
//     the messages after it.
//   - outbox_messages_sent, on (published_at) where status is SENT, and
//     outbox_messages_discarded, on (discarded_at) where status is
//     DISCARDED: retention deletes the oldest of them in bounded batches,
//     and the statistics read them, without scanning the table (package
//     ops).
//   - outbox_messages_dead, on (seq) where status is DEAD_LETTER: listing
//     and grouping the dead letters reads only them, however long the
//     backlog (migration 014, package ops).
//   - The unique index on id serves [Store.Get].
//
// # Claiming
//
// Claim mode is the default: every relay claims due messages from the
// table and marks each one, on a [Store]. [Store.Claim] is one autocommit statement: a CTE selects due heads of
// aggregates with FOR UPDATE SKIP LOCKED, and an UPDATE leases them under a
// new random token. MarkSent, MarkFailed and Release change a row only while
// it is IN_FLIGHT under that token, so a relay whose lease expired and was
// taken over changes nothing.
//
// The lease is the columns lease_owner, lease_token and lease_expires_at,
// and next_attempt_at, which the claim moves to the lease's end; the status
// column stays PENDING (or FAILED). No index covers those columns or names
// them in its predicate, so PostgreSQL updates the row in place (HOT) where
// its page has room: a claim writes no index entries. Every reader of the
// store reports a PENDING or FAILED row with a lease token as IN_FLIGHT.
// Rows stored IN_FLIGHT by earlier versions are due when their lease ends
// and fenced by their token, as before.
//
// A claim with ClaimParams.MaxRun above 1 leases runs: with each head, in
// the same statement and under the same token, its followers, the unsent
// messages of its aggregate right after it in seq order, taken in order
// until the first that is not due, is held by another transaction (a row
// lock), or would take the run's payload beyond ClaimParams.MaxRunBytes,
// at most MaxRun - 1 of them (queries/claim_run.sql). A run never skips a
// message: the followers are ranked before they are locked, and a run ends
// before its first rank that SKIP LOCKED left out. The heads fill the
// batch first; the followers fill what is left of ClaimParams.Limit rank by
// rank, every head's first follower before any head's second, so that the
// aggregates in a batch share it. MarkSent, MarkFailed and Release take
// any of a claim's messages, as without runs; a run that is not marked
// comes back whole when its lease expires. With MaxRun 0 or 1 a claim is
// of heads only (queries/claim.sql). Cursor mode's table path claims heads
// only.
//
// Order within an aggregate is seq order. seq is assigned when a row is
// inserted, not when it commits, so two transactions that write the same
// aggregate at the same time should be serialised by the application, as
// they normally are by a lock on the aggregate's own row (an UPDATE of the
// order, say); otherwise the later seq may commit, and be published, first.
// Runs keep this guarantee: a follower is leased only when every earlier
// unsent message of its aggregate that the claim sees is in its run, the
// condition under which a claim of heads takes a message; with serialised
// writers every earlier message of an aggregate committed before the
// follower was inserted, so a claim that sees the follower sees them too.
//
// # Cursor mode
//
// In claim mode every message is claimed (an UPDATE) and marked SENT
// (another UPDATE): two new row versions, their index entries and their
// WAL for every message, on the server the writers use. In cursor mode
// ([Store.SetMode] to [ModeCursor], or [Store.EnableCursor]) the outbox is
// read like a log: one relay, the leader, reads the QUEUED messages in seq
// order, publishes them, and keeps its place in the single row of
// outbox_cursor. A message's row is written only if its publish fails.
//
// The cursor strategy, package relay/cursor, is the logic of cursor mode:
// the leader's window over the log and its gaps, the lead and its lease,
// acknowledgements in memory, and what moves to the table path. Its
// package documentation gives the rules and why they hold. This package
// is its database side, [CursorDB] ([Store.CursorDB]): the SQL of cursor
// mode (queries/cursor_*.sql) and its execution, in round trips of one
// transaction each that do what the strategy planned: the leader's read
// of the log and of its gaps (first in the round trip: see
// [CursorDB.Trip]), the save of its position, which renews its lease and
// fences its writes by its lease token, the move of messages to the table
// path, the marks of table-path messages, a standby's attempt to lead, and
// the table path's claim (claim mode's claim over the messages that are
// not QUEUED); and apart from those the lease's renewal, the resignation,
// the record of failed publishes, the release of table-path messages, and
// the read of the mode.
//
// Each mode has its own claims: on an outbox in cursor mode [Store.Claim]
// and [Store.MarkSentAndClaim] return an error wrapping [ErrNotClaimMode]
// (a Store checks the mode before its first claim and every few seconds in
// a claim's round trip), and on an outbox not in cursor mode the cursor
// strategy's claims return one wrapping [ErrNotCursorMode]; each says what
// to run instead. Package relay/modes catches both and switches the relay
// to the other strategy, so a relay follows a switch while it runs.
// [Store.MarkSent], MarkFailed and Release mark a Store's claims in any
// mode, so that a claim made just before a switch is still marked.
//
// [Store.Enqueue] takes the transaction's id before its seqs (and in
// cursor mode a trigger does so for any insert, migration 012): the
// leader's rule for closing a gap rests on it.
package pgstore

// Package pgstore is the PostgreSQL outbox store, built on pgx v5. It
// writes messages inside the application's own transactions and implements
// [store.Queue] and [store.Notifier] for the relay: [Store] claims messages
// in claim mode, and a [Cursor] of it reads them in cursor mode.
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
// (import _ "github.com/jackc/pgx/v5/stdlib"; sql.Open("pgx", url)) and use
// [Store.EnqueueSQL] with the *sql.Tx; it runs the same statement.
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
//     aggregate in order.
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
// Order within an aggregate is seq order. seq is assigned when a row is
// inserted, not when it commits, so two transactions that write the same
// aggregate at the same time should be serialised by the application, as
// they normally are by a lock on the aggregate's own row (an UPDATE of the
// order, say); otherwise the later seq may commit, and be published, first.
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
// Each relay reads an outbox in cursor mode through a [Cursor] of its own,
// made by [Store.Cursor]: it shares the Store's pool and Config, and
// implements [store.Queue], [store.MarkClaimer] and [store.Notifier] with
// the same contract, so that the relay's loop, its batches, retries and
// dead letters do not change (package relay/cursor is the relay's cursor
// strategy on it). Its claim hands out the leader's messages and the table
// path's, and its MarkSent of a cursor message is answered from memory
// ([Cursor.MarksInMemory]). Each mode has its own claims: on an outbox in
// cursor mode [Store.Claim] and [Store.MarkSentAndClaim] return an error
// wrapping [ErrNotClaimMode] (a Store checks the mode before its first
// claim and every few seconds in a claim's round trip), and on an outbox
// not in cursor mode [Cursor.Claim] returns one wrapping
// [ErrNotCursorMode]; each says what to run instead. Package relay/modes
// catches both and switches the relay to the other strategy, so a relay
// follows a switch while it runs. [Store.MarkSent],
// MarkFailed and Release mark a Store's claims in any mode, so that a
// claim made just before a switch is still marked.
//
// Not passing a message that is still committing: seqs are taken at INSERT
// but become visible at COMMIT, so a reader can see seq 11 while seq 10 is
// still uncommitted. The leader therefore keeps a window over the seqs
// between its saved position and the highest seq it read, with the gaps it
// saw there, and reads the gaps again with every read. A gap is closed (its
// seqs will never commit: the transaction rolled back, or the seq was
// never used) only when
//
//  1. a read's snapshot has an xmin at least the bound of the read that
//     found the gap: a transaction id that read took after its snapshot.
//     Every seq of the gap was taken before that snapshot (a higher seq was
//     already visible in it), by a transaction that had an id then, because
//     [Store.Enqueue] takes the transaction id before the seqs. Such a
//     transaction was either finished then, so its rows were visible, or
//     running, so its id was below the bound; once a snapshot's xmin reached
//     the bound, it has ended (every transaction running in that snapshot
//     has an id at or above xmin), and a read after that sees its rows if it
//     committed. The snapshot's own xmax is not such a bound: it is the
//     newest ended id plus one, and a transaction running with a newer id is
//     counted neither there nor in xmin.
//  2. at least a second passed since the gap was found, for writers that
//     insert rows in other ways than Enqueue (their first INSERT may take a
//     seq a few microseconds before the transaction gets its id).
//
// The position only moves over handled messages and closed gaps. A long
// transaction anywhere on the server holds xmin back, and with it the
// saved position, but not publishing: messages are published as soon as
// they are visible.
//
// What a new leader publishes again: with the position, a save records the
// leader's head and the ranges at or below it that it has not handled
// (open records and gaps, migration 011); every other seq above the
// position was handled. A new leader starts with those ranges as gaps, so
// it publishes again only what its predecessor had not had acknowledged at
// its last save: what was in flight, and what was acknowledged in the last
// Config.CursorSaveInterval. A save is due when the position moved or
// anything was handled since the last one.
//
// One leader, and the table path: the leader holds a lease on the cursor
// row (its token fences every write it makes, as claims are fenced):
// Config.LeaderLease, 5 s by default, of its own and not the claims'
// lease. Its saves renew it, and so does the Cursor itself, on a goroutine
// of its own, every third of the lease from the moment it leads until it
// resigns, loses the lead or the pool is closed, whatever its caller does:
// an idle leader, or one whose publishes wait for a broker that does not
// answer, keeps the lead, with relay.Relay or without it, and behind any
// wrapper of the Cursor (a program that drives a Cursor itself calls
// Resign when it stops using it; a leading Cursor that gets no claim for
// two minutes gives the lead up by itself). Other relays are standbys:
// they try to lead at least five times per lease and take over when the
// lease has expired (a leader that hangs, is stopped or cut off renews
// nothing), or at once when the leader resigned ([Cursor.Resign], called
// when the relay stops). A leader that resumes after its lease ran out
// finds that before anything it does, and a write already under way
// changes nothing once another relay took the lease (its token is not the
// cursor row's): it saves no position, moves no message to the table
// path, and its acknowledgements in memory are dropped with its window. The next
// leader publishes again what the old one had not saved as handled, and
// the old one's publishes that were in flight when it hung may still reach
// the broker: duplicates, which at-least-once allows; each of those was
// published after the earlier messages of its aggregate were acknowledged,
// so the first copies stay in order. Any relay, leader or standby, also
// runs the table path: the claim of claim mode, over the
// messages that are not QUEUED (PENDING, FAILED, IN_FLIGHT, whatever was in
// the table before cursor mode was turned on, and replayed dead letters).
// A cursor message whose publish failed becomes FAILED (or DEAD_LETTER)
// and enters the table path, which retries it; the later messages of its
// aggregate follow it there as PENDING, and so does every message read
// later while an earlier message of its aggregate is in the table path.
// Order per aggregate holds across both paths.
package pgstore

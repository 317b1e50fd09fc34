// Package inbox makes a consumer idempotent: it applies each delivered
// message once, inside the consumer's own database transaction, however
// often the message is delivered.
//
//	ib, err := inbox.New(pool, inbox.Config{})
//	...
//	err = ib.Migrate(ctx) // once at start-up
//	...
//	msg, err := inbox.FromRecord(record) // a *kgo.Record
//	...
//	res, err := ib.Handle(ctx, "billing", msg, func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
//		_, err := tx.Exec(ctx, "INSERT INTO invoices (order_id) VALUES ($1)", m.AggregateID)
//		return err // the invoice and the record of msg commit together
//	})
//	// res is inbox.Processed, or inbox.Duplicate if msg was applied before
//
// Package consumer runs Handle for each record of a Kafka consumer group.
//
// # Why consumers see duplicates
//
// The outbox relay publishes at least once: a relay that dies after the
// broker's ack but before it marks the message sent publishes it again. A
// consumer, too, commits its Kafka offset only after it applied a record; if
// it dies in between, the record is delivered again to whoever takes over
// the partition. So every message may arrive more than once, and the
// consumer must make the second arrival harmless. "At least once" for a
// consumer means: nothing is lost, and duplicates are expected.
//
// The inbox does this by recording (consumer name, message id) in the same
// transaction as the message's effect. Either both commit or neither: an
// invoice without the record, or the record without the invoice, cannot
// exist.
//
// # Handling a message with a business table
//
// Create the inbox on the consumer's pool, migrate it once at start-up,
// and apply each message with [Inbox.Handle]. The handler gets the
// transaction; it must write with it, and must not commit it:
//
//	ib, err := inbox.New(pool, inbox.Config{Schema: "inbox"})
//	...
//	err = ib.Migrate(ctx)
//	...
//	res, err := ib.Handle(ctx, "billing", msg, func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
//		var p struct{ OrderID, Amount string }
//		if err := json.Unmarshal(m.Payload, &p); err != nil {
//			return fmt.Errorf("payload: %v: %w", err, inbox.ErrPermanent)
//		}
//		_, err := tx.Exec(ctx, "INSERT INTO invoices (order_id, amount) VALUES ($1, $2)", p.OrderID, p.Amount)
//		return err
//	})
//
// Handle first inserts the record into <schema>.inbox_processed, whose
// primary key is (consumer, message_id), then runs the handler, then
// commits:
//
//   - A message the consumer processed before makes the insert fail with
//     PostgreSQL's unique_violation (SQLSTATE 23505, recognised by its code,
//     never by the error text): the handler does not run, and Handle
//     returns (Duplicate, nil). A duplicate is not an error.
//   - Two instances that get the same message at the same moment both try
//     the insert; the second waits for the first transaction. If it
//     commits, the second gets the violation (Duplicate); if it rolls back,
//     the second goes ahead. Exactly one effect either way.
//   - A handler error, or a failed commit (the database went away), leaves
//     neither effect nor record; the message can simply be handled again.
//
// A unique violation raised by the handler's own statements is the
// handler's error, not a duplicate. Several consumers (billing, inventory)
// each process a message once, independently: the consumer name is part of
// the key.
//
// Messages come from Kafka records with [FromRecord], which reads the
// outbox's record contract (headers eventId, eventType, eventVersion, ...).
// The consumer package runs a Kafka consumer group around Handle.
//
// # Parked messages
//
// A message a consumer gives up on (a record that breaks the contract, an
// error wrapping [ErrPermanent], too many failed attempts) is parked with
// [Inbox.Park] in <schema>.inbox_parked: payload, headers, topic, partition,
// offset, error and attempts. [Inbox.Parked] lists them; after a fix,
// [Inbox.Replay] runs the handler on one through Handle, so a replay is
// applied once too, and marks it replayed (the row is kept for audit).
//
// # Retention
//
// The processed ids must be kept as long as a message can come back:
// longer than the topic's retention.ms (a group whose offsets expired or
// were reset reads the whole topic again). Config.Retention (30 days by
// default) says how long; run [Inbox.Cleanup] periodically to delete older
// ids in small batches.
//
// Cleanup keeps the parked messages bounded too. A replayed entry is a
// record of what went wrong; Config.ReplayedRetention (90 days by default)
// says how long it is kept after its replay. An entry never replayed is
// the only copy of a message the consumer has not applied, so by default
// it is kept until it is replayed: deleting it would lose the event.
// Config.ParkedRetention (off by default) deletes such entries once parked
// longer than it ago, for consumers that may give a message up; each
// deletion is logged as a warning.
//
// # SQLite
//
// [NewSQLite] gives the same inbox in a SQLite database, for services that
// keep their tables (and their outbox, store/sqlitestore) in one SQLite
// file. Use the *sql.DB from sqlitestore.Open for everything: its write
// transactions take SQLite's write lock at BEGIN and queue for it in the
// process, so the application, the relay and the consumers share the file
// without "database is locked". Handlers are [SQLHandlerFunc]s that get the
// *sql.Tx. [SQLiteInbox.Handle] inserts the record first, like
// [Inbox.Handle]; a duplicate fails with SQLITE_CONSTRAINT_PRIMARYKEY,
// recognised by its extended result code. Because the transaction holds the
// write lock from BEGIN, two deliveries of one message cannot overlap: the
// second starts after the first committed (and is a Duplicate) or rolled
// back (and goes ahead). Park, Parked, Replay and Cleanup behave as in
// PostgreSQL; both inboxes share that logic. The tables are
// <prefix>inbox_processed, <prefix>inbox_parked and <prefix>inbox_migrations
// (SQLiteConfig.TablePrefix, empty by default), created by
// [SQLiteInbox.Migrate]; times are unix milliseconds by the database clock.
//
// # database/sql on PostgreSQL
//
// [Inbox.SQL] is the PostgreSQL inbox through database/sql ([SQLInbox]):
// its Handle, Replay and Bind take [SQLHandlerFunc]s, whose transaction is
// a *sql.Tx of pgx's stdlib driver over the inbox's own pool. The tables,
// the guarantees and the duplicate detection (unique_violation by its
// SQLSTATE) are the Inbox's, and a message applied through one face is a
// duplicate through the other. So a consumer whose handlers take a *sql.Tx
// runs on PostgreSQL and SQLite alike; only its SQL text differs:
//
//	bound := ib.SQL().Bind(invoice)     // PostgreSQL
//	bound := sqliteInbox.Bind(invoice)  // SQLite
//
// # Consumer runners
//
// [Inbox.Bind], [SQLInbox.Bind] and [SQLiteInbox.Bind] return the inbox
// with a handler bound to it ([Bound]), which the consumer package's runner
// takes as consumer.Config.Applier, whichever the database.
//
// # Schema
//
// [Inbox.Migrate] creates the schema (default "inbox", validated and quoted)
// and applies the embedded, numbered migrations, idempotently and safely
// when several instances start at once (an advisory lock serialises them).
// The inbox tables may live in any database the handler writes to; they
// must be in the same database as the business tables, since they share
// one transaction.
package inbox

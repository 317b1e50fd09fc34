package outbox

import "context"

// Enqueuer writes messages to an outbox inside a transaction of the
// caller's, of the transaction type Tx of the caller's database driver.
// The messages become visible to the relay only if tx commits, and are
// gone if it rolls back, with the business change they describe.
//
// Every store is one, for the transaction types it takes:
//
//   - *pgstore.Store is an Enqueuer[pgx.Tx] (PostgreSQL with pgx);
//   - pgstore.Store.SQL() is an Enqueuer[*sql.Tx] (PostgreSQL with
//     database/sql and pgx's stdlib driver);
//   - *sqlitestore.Store is an Enqueuer[*sql.Tx] (SQLite).
//
// Application code that takes an Enqueuer[*sql.Tx] runs unchanged on
// PostgreSQL and SQLite; code generic in Tx enqueues the same way on any
// of them. A pool or a connection is not a transaction and is not
// accepted: an event cannot be committed apart from its change by mistake.
//
// Enqueue validates every message with [Prepare] first: an invalid one
// gives a *[ValidationError] (wrapping [ErrInvalidMessage]) naming its
// index, field and rule, and nothing is written. Enqueue with no messages
// does nothing.
type Enqueuer[Tx any] interface {
	Enqueue(ctx context.Context, tx Tx, msgs ...Message) error
}

package inbox

import (
	"context"
	"database/sql"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/stdlib"
)

// SQLInbox is the PostgreSQL inbox through database/sql, as [Inbox.SQL]
// returns it: the same tables, guarantees and parked messages as the
// [Inbox] it belongs to, with handlers that take a *sql.Tx
// ([SQLHandlerFunc]) like those of a [SQLiteInbox]. A consumer written
// against SQLHandlerFunc runs on PostgreSQL and SQLite; only its SQL
// differs. It is safe for concurrent use.
type SQLInbox struct {
	i  *Inbox
	db *sql.DB
}

// SQL returns the inbox's database/sql face. Its transactions come from a
// *sql.DB over the inbox's own pool (pgx's stdlib driver,
// stdlib.OpenDBFromPool), so they borrow the pool's connections and keep
// none idle of their own. SQL returns the same *SQLInbox on every call.
func (i *Inbox) SQL() *SQLInbox {
	i.sqlOnce.Do(func() { i.sql = &SQLInbox{i: i, db: stdlib.OpenDBFromPool(i.pool)} })
	return i.sql
}

// DB returns the *sql.DB the handlers' transactions come from, for the
// consumer's reads and writes outside a handler. It lives as long as the
// inbox's pool; closing it does not close the pool.
func (s *SQLInbox) DB() *sql.DB { return s.db }

// Handle runs fn in a new database/sql transaction together with recording
// (consumer, msg.ID), and commits both or neither; everything
// [Inbox.Handle] says holds: a message consumer processed before is a
// Duplicate (PostgreSQL's unique_violation on the record, recognised by
// its SQLSTATE), fn does not run for it; two concurrent deliveries have
// exactly one effect; an error of fn or of the commit leaves neither fn's
// work nor the record.
func (s *SQLInbox) Handle(ctx context.Context, consumer string, msg Message, fn SQLHandlerFunc) (Result, error) {
	if err := checkHandle(consumer, msg.ID, fn == nil); err != nil {
		return 0, err
	}
	return handleTx(ctx, s.txOps(), consumer, msg, fn)
}

// Replay handles the parked message id of consumer again through
// [SQLInbox.Handle], and in the same transaction marks the entry replayed;
// see [Inbox.Replay] for the results and errors.
func (s *SQLInbox) Replay(ctx context.Context, consumer string, id uuid.UUID, fn SQLHandlerFunc) (Result, error) {
	return replayTx(ctx, s.txOps(), consumer, id, fn, fn == nil)
}

// Bind returns the inbox with fn bound to it, for a consumer runner
// (consumer.Config.Applier): its Apply is [SQLInbox.Handle] with fn; it
// parks with [Inbox.Park].
func (s *SQLInbox) Bind(fn SQLHandlerFunc) *Bound {
	return &Bound{inbox: s.i, apply: func(ctx context.Context, consumer string, msg Message) (Result, error) {
		return s.Handle(ctx, consumer, msg, fn)
	}}
}

// txOps are the inbox's PostgreSQL operations for the shared logic, with
// database/sql transactions over the inbox's pool.
func (s *SQLInbox) txOps() txOps[*sql.Tx] {
	return sqlTxOps(s.i.log, s.db, s.i.q, isUniqueViolation, s.i.parkedGet)
}

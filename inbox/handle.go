package inbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// uniqueViolation is PostgreSQL's SQLSTATE for unique_violation. Duplicate
// detection compares this code, never an error's text.
const uniqueViolation = "23505"

// Result says what [Inbox.Handle] did with a message.
type Result int

const (
	// Processed: the handler ran and its transaction committed together
	// with the record of the message.
	Processed Result = iota + 1
	// Duplicate: the consumer had already processed the message; nothing
	// was changed.
	Duplicate
)

// String returns "processed", "duplicate", or "Result(n)" for other values.
func (r Result) String() string {
	switch r {
	case Processed:
		return "processed"
	case Duplicate:
		return "duplicate"
	}
	return fmt.Sprintf("Result(%d)", int(r))
}

// HandlerFunc applies a message's effect with tx, the transaction that also
// records the message as processed. It must do all its database work with
// tx (work done on other connections is not undone with it) and must not
// commit or roll tx back. An error rolls back both the effect and the
// record; wrap [ErrPermanent] into it when retrying cannot help.
type HandlerFunc func(ctx context.Context, tx pgx.Tx, msg Message) error

// Handle runs fn in a new transaction together with recording (consumer,
// msg.ID), and commits both or neither:
//
//   - The record is inserted first. If consumer already processed msg.ID,
//     the insert fails with unique_violation: fn is not run, the
//     transaction is rolled back, and Handle returns (Duplicate, nil).
//   - If another transaction is recording the same message at this moment
//     (two instances got the same delivery), the insert waits for it: if it
//     commits, this is a Duplicate; if it rolls back, this one proceeds. So
//     two concurrent deliveries have exactly one effect.
//   - If fn returns an error, or the commit fails, nothing of fn's work and
//     no record remain; Handle returns the error (wrapped; errors.Is finds
//     fn's error and [ErrPermanent]) and the message can be handled again.
//
// consumer names the consuming application (for example the Kafka group);
// each consumer processes a message once, independently of the others.
// msg.ID must not be the nil UUID (the error wraps [ErrMalformed]).
func (i *Inbox) Handle(ctx context.Context, consumer string, msg Message, fn HandlerFunc) (Result, error) {
	if err := checkHandle(consumer, msg.ID, fn == nil); err != nil {
		return 0, err
	}
	return handleTx(ctx, i.txOps(), consumer, msg, fn)
}

// checkHandle rejects what Handle cannot do: a message without an id, an
// empty consumer name, a nil handler.
func checkHandle(consumer string, id uuid.UUID, nilFn bool) error {
	switch {
	case consumer == "":
		return errors.New("inbox: handle: empty consumer name")
	case nilFn:
		return errors.New("inbox: handle: nil handler")
	case id == uuid.Nil:
		return fmt.Errorf("%w: message has no id (eventId), so it cannot be deduplicated", ErrMalformed)
	}
	return nil
}

// txOps are what the logic both inboxes share (Handle, Replay) needs of one
// database: its transactions of type T and the statements run in them.
type txOps[T any] struct {
	log    *slog.Logger
	begin  func(context.Context) (T, error)
	commit func(context.Context, T) error
	// rollback is deferred after begin; it must be a no-op after commit.
	rollback func(context.Context, T)
	// markProcessed inserts (consumer, id) into the processed table with a
	// plain INSERT; isDuplicate reports whether its error is the primary
	// key's violation, judged by the database's error code.
	markProcessed func(ctx context.Context, tx T, consumer string, id uuid.UUID) error
	isDuplicate   func(error) bool
	// markReplayed marks the parked entry id replayed, with tx.
	markReplayed func(ctx context.Context, tx T, id uuid.UUID) error
	// markReplayedNow does the same in a transaction of its own.
	markReplayedNow func(ctx context.Context, id uuid.UUID) error
	// parkedGet reads consumer's parked entry id; ok is false when there
	// is none.
	parkedGet func(ctx context.Context, consumer string, id uuid.UUID) (p Parked, ok bool, err error)
}

// handleTx is Handle on any database: record, run fn, commit, in one
// transaction. See [Inbox.Handle].
func handleTx[T any](ctx context.Context, ops txOps[T], consumer string, msg Message,
	fn func(context.Context, T, Message) error) (Result, error) {
	tx, err := ops.begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("inbox: handle message %s: begin: %w", msg.ID, err)
	}
	defer ops.rollback(ctx, tx) // a no-op after commit

	if err := ops.markProcessed(ctx, tx, consumer, msg.ID); err != nil {
		if ops.isDuplicate(err) {
			ops.log.Debug("inbox: duplicate message", msgAttrs(consumer, msg)...)
			return Duplicate, nil
		}
		return 0, fmt.Errorf("inbox: handle message %s: record as processed: %w", msg.ID, err)
	}
	if err := fn(ctx, tx, msg); err != nil {
		return 0, fmt.Errorf("inbox: handle message %s (%s): %w", msg.ID, msg.EventType, err)
	}
	if err := ops.commit(ctx, tx); err != nil {
		return 0, fmt.Errorf("inbox: handle message %s: commit: %w", msg.ID, err)
	}
	return Processed, nil
}

// sqlTxOps are the operations of the shared logic on database/sql: the
// transactions of db and the statements of q, ids passed as text; what
// runs outside a handler's transaction runs on db. isDuplicate recognises
// the processed record's key violation of db's database, parkedGet reads a
// parked entry.
func sqlTxOps(log *slog.Logger, db *sql.DB, q queries, isDuplicate func(error) bool,
	parkedGet func(context.Context, string, uuid.UUID) (Parked, bool, error)) txOps[*sql.Tx] {
	return txOps[*sql.Tx]{
		log:      log,
		begin:    func(ctx context.Context) (*sql.Tx, error) { return db.BeginTx(ctx, nil) },
		commit:   func(_ context.Context, tx *sql.Tx) error { return tx.Commit() },
		rollback: func(_ context.Context, tx *sql.Tx) { _ = tx.Rollback() },
		markProcessed: func(ctx context.Context, tx *sql.Tx, consumer string, id uuid.UUID) error {
			_, err := tx.ExecContext(ctx, q.markProcessed, consumer, id.String())
			return err
		},
		isDuplicate: isDuplicate,
		markReplayed: func(ctx context.Context, tx *sql.Tx, id uuid.UUID) error {
			_, err := tx.ExecContext(ctx, q.markReplayed, id.String())
			return err
		},
		markReplayedNow: func(ctx context.Context, id uuid.UUID) error {
			_, err := db.ExecContext(ctx, q.markReplayed, id.String())
			return err
		},
		parkedGet: parkedGet,
	}
}

// txOps are the inbox's PostgreSQL operations for the shared logic.
func (i *Inbox) txOps() txOps[pgx.Tx] {
	return txOps[pgx.Tx]{
		log:      i.log,
		begin:    i.pool.Begin,
		commit:   func(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) },
		rollback: func(ctx context.Context, tx pgx.Tx) { _ = tx.Rollback(ctx) },
		markProcessed: func(ctx context.Context, tx pgx.Tx, consumer string, id uuid.UUID) error {
			_, err := tx.Exec(ctx, i.q.markProcessed, consumer, id)
			return err
		},
		isDuplicate: isUniqueViolation,
		markReplayed: func(ctx context.Context, tx pgx.Tx, id uuid.UUID) error {
			_, err := tx.Exec(ctx, i.q.markReplayed, id)
			return err
		},
		markReplayedNow: func(ctx context.Context, id uuid.UUID) error {
			_, err := i.pool.Exec(ctx, i.q.markReplayed, id)
			return err
		},
		parkedGet: i.parkedGet,
	}
}

// isUniqueViolation reports whether err is PostgreSQL's unique_violation,
// by its SQLSTATE code.
func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == uniqueViolation
}

// msgAttrs are the log attributes of a message.
func msgAttrs(consumer string, msg Message) []any {
	return []any{
		slog.String("consumer", consumer),
		slog.String("message_id", msg.ID.String()),
		slog.String("aggregate_id", msg.AggregateID),
		slog.String("event_type", msg.EventType),
		slog.String("topic", msg.Topic),
		slog.Int("partition", int(msg.Partition)),
		slog.Int64("offset", msg.Offset),
	}
}

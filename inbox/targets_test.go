package inbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox/inbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/store/sqlitestore"
)

// The behaviour suite (behaviour_test.go) runs every test against each
// inbox: PostgreSQL with pgx (Inbox), PostgreSQL with database/sql
// (Inbox.SQL) and SQLite (SQLiteInbox). A target is one inbox
// under test with two business tables in its database: effects (one row
// per applied message) and invoices (primary key order_id).
type target interface {
	// handle, replay and bind run h with the inbox's own transaction type;
	// a nil h passes a nil handler.
	handle(ctx context.Context, consumer string, m inbox.Message, h handler) (inbox.Result, error)
	replay(ctx context.Context, consumer string, id uuid.UUID, h handler) (inbox.Result, error)
	bind(h handler) *inbox.Bound
	Park(ctx context.Context, consumer string, m inbox.Message, attempts int, cause error) error
	Parked(ctx context.Context, f inbox.ParkedFilter) ([]inbox.Parked, error)
	Cleanup(ctx context.Context) (int64, error)
	CleanupBatch(ctx context.Context, what string) (int64, error)
	Ping(ctx context.Context) error

	// effects counts the effect rows of a message.
	effects(t *testing.T, id uuid.UUID) int
	// marked reports whether consumer recorded the message as processed.
	marked(t *testing.T, consumer string, id uuid.UUID) bool
	// processed counts all recorded messages.
	processed(t *testing.T) int
	// backdate makes the records of ids look processed age ago.
	backdate(t *testing.T, age time.Duration, ids ...uuid.UUID)
	// backdateParked makes the parked entries ids look parked (column
	// parked_at) or replayed (replayed_at) age ago.
	backdateParked(t *testing.T, column string, age time.Duration, ids ...uuid.UUID)
	// overlap returns once n other deliveries of a message wait for the
	// transaction that recorded it, as far as the database lets a test see.
	overlap(ctx context.Context, n int) error
}

// handler is a message handler written once for every inbox: tx does its
// writes in the inbox's transaction.
type handler func(ctx context.Context, m inbox.Message, tx effectWriter) error

// effectWriter writes to the business tables within a handler's
// transaction.
type effectWriter interface {
	// effect writes one effect row for m.
	effect(m inbox.Message) error
	// invoice writes an invoice row; a second one of an order violates the
	// primary key.
	invoice(orderID string) error
}

// applyEffect is a handler that writes one effect row.
func applyEffect(_ context.Context, m inbox.Message, tx effectWriter) error { return tx.effect(m) }

// mustHandle handles m for consumer with h and fails the test unless the
// result is want.
func mustHandle(t *testing.T, ib target, consumer string, m inbox.Message, h handler, want inbox.Result) {
	t.Helper()
	if res, err := ib.handle(testCtx(t), consumer, m, h); err != nil || res != want {
		t.Fatalf("Handle(%s) by %s = %v, %v; want %v", m.ID, consumer, res, err, want)
	}
}

// mustReplay replays the parked entry id of consumer with h and fails the
// test unless the result is want.
func mustReplay(t *testing.T, ib target, consumer string, id uuid.UUID, h handler, want inbox.Result) {
	t.Helper()
	if res, err := ib.replay(testCtx(t), consumer, id, h); err != nil || res != want {
		t.Fatalf("Replay(%s) by %s = %v, %v; want %v", id, consumer, res, err, want)
	}
}

// wantEffects fails the test unless the message has want effect rows.
func wantEffects(t *testing.T, ib target, id uuid.UUID, want int) {
	t.Helper()
	if n := ib.effects(t, id); n != want {
		t.Errorf("message %s has %d effects, want %d", id, n, want)
	}
}

// targetConfig configures the inbox of a target; zero fields mean the
// defaults.
type targetConfig struct {
	retention, replayed, parked time.Duration
	batch                       int
}

// setupFunc creates a migrated target with empty tables.
type setupFunc func(t *testing.T, cfg targetConfig) target

// eachInbox runs test, in parallel, once per inbox.
func eachInbox(t *testing.T, test func(t *testing.T, setup setupFunc)) {
	t.Helper()
	t.Parallel()
	for _, c := range []struct {
		name  string
		setup setupFunc
	}{{"postgres", setupPG}, {"postgres-sql", setupPGSQL}, {"sqlite", setupSQLite}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			test(t, c.setup)
		})
	}
}

// --- PostgreSQL ---

type pgTarget struct {
	*inbox.Inbox
	b        *bundle
	observer interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}
}

func setupPG(t *testing.T, cfg targetConfig) target {
	b := setup(t)
	ib, err := inbox.New(b.pool, inbox.Config{Schema: b.schema, Retention: cfg.retention,
		ReplayedRetention: cfg.replayed, ParkedRetention: cfg.parked, CleanupBatchSize: cfg.batch, Logger: quiet})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	b.exec(t, "CREATE TABLE {{schema}}.invoices (order_id text PRIMARY KEY)")
	return &pgTarget{Inbox: ib, b: b, observer: pgtest.Pool(t, b.schema)}
}

// pgWriter writes with a pgx transaction.
type pgWriter struct {
	ctx context.Context
	tx  pgx.Tx
	b   *bundle
}

func (w pgWriter) effect(m inbox.Message) error { return w.b.applyEffect(w.ctx, w.tx, m) }

func (w pgWriter) invoice(orderID string) error {
	_, err := w.tx.Exec(w.ctx, w.b.sql("INSERT INTO {{schema}}.invoices (order_id) VALUES ($1)"), orderID)
	return err
}

func (p *pgTarget) fn(h handler) inbox.HandlerFunc {
	if h == nil {
		return nil
	}
	return func(ctx context.Context, tx pgx.Tx, m inbox.Message) error { return h(ctx, m, pgWriter{ctx, tx, p.b}) }
}

func (p *pgTarget) handle(ctx context.Context, consumer string, m inbox.Message, h handler) (inbox.Result, error) {
	return p.Handle(ctx, consumer, m, p.fn(h))
}

func (p *pgTarget) replay(ctx context.Context, consumer string, id uuid.UUID, h handler) (inbox.Result, error) {
	return p.Replay(ctx, consumer, id, p.fn(h))
}

func (p *pgTarget) bind(h handler) *inbox.Bound { return p.Bind(p.fn(h)) }

func (p *pgTarget) effects(t *testing.T, id uuid.UUID) int { return p.b.effects(t, id) }

func (p *pgTarget) marked(t *testing.T, consumer string, id uuid.UUID) bool {
	return p.b.marked(t, consumer, id)
}

func (p *pgTarget) processed(t *testing.T) int {
	return p.b.count(t, "SELECT count(*) FROM {{schema}}.inbox_processed")
}

func (p *pgTarget) backdate(t *testing.T, age time.Duration, ids ...uuid.UUID) {
	p.b.exec(t, "UPDATE {{schema}}.inbox_processed SET processed_at = now() - $1::bigint * interval '1 microsecond' WHERE message_id = ANY($2)",
		age.Microseconds(), ids)
}

func (p *pgTarget) backdateParked(t *testing.T, column string, age time.Duration, ids ...uuid.UUID) {
	p.b.exec(t, "UPDATE {{schema}}.inbox_parked SET "+column+" = now() - $1::bigint * interval '1 microsecond' WHERE id = ANY($2)",
		age.Microseconds(), ids)
}

// overlap waits until n backends are blocked on the lock of the record's
// row.
func (p *pgTarget) overlap(ctx context.Context, n int) error {
	return waitForInsertWaiters(ctx, p.observer, p.b.schema, n)
}

// --- PostgreSQL through database/sql ---

// pgSQLTarget is a PostgreSQL inbox whose handlers run through its
// database/sql face; parking, listing and cleanup are the Inbox's.
type pgSQLTarget struct {
	*pgTarget
	sql *inbox.SQLInbox
}

func setupPGSQL(t *testing.T, cfg targetConfig) target {
	pg := setupPG(t, cfg).(*pgTarget)
	return &pgSQLTarget{pgTarget: pg, sql: pg.SQL()}
}

// pgSQLWriter writes with a database/sql transaction on PostgreSQL.
type pgSQLWriter struct {
	ctx context.Context
	tx  *sql.Tx
	b   *bundle
}

func (w pgSQLWriter) effect(m inbox.Message) error {
	_, err := w.tx.ExecContext(w.ctx, w.b.sql("INSERT INTO {{schema}}.effects (message_id) VALUES ($1)"), m.ID)
	return err
}

func (w pgSQLWriter) invoice(orderID string) error {
	_, err := w.tx.ExecContext(w.ctx, w.b.sql("INSERT INTO {{schema}}.invoices (order_id) VALUES ($1)"), orderID)
	return err
}

func (p *pgSQLTarget) fn(h handler) inbox.SQLHandlerFunc {
	if h == nil {
		return nil
	}
	return func(ctx context.Context, tx *sql.Tx, m inbox.Message) error {
		return h(ctx, m, pgSQLWriter{ctx, tx, p.b})
	}
}

func (p *pgSQLTarget) handle(ctx context.Context, consumer string, m inbox.Message, h handler) (inbox.Result, error) {
	return p.sql.Handle(ctx, consumer, m, p.fn(h))
}

func (p *pgSQLTarget) replay(ctx context.Context, consumer string, id uuid.UUID, h handler) (inbox.Result, error) {
	return p.sql.Replay(ctx, consumer, id, p.fn(h))
}

func (p *pgSQLTarget) bind(h handler) *inbox.Bound { return p.sql.Bind(p.fn(h)) }

// --- SQLite ---

type sqliteTarget struct {
	*inbox.SQLiteInbox
	db *sql.DB
	// entered counts the deliveries that called Handle.
	entered atomic.Int32
}

func setupSQLite(t *testing.T, cfg targetConfig) target {
	t.Helper()
	db := openSQLite(t, filepath.Join(t.TempDir(), "app.db"))
	ib, err := inbox.NewSQLite(db, inbox.SQLiteConfig{Retention: cfg.retention, ReplayedRetention: cfg.replayed,
		ParkedRetention: cfg.parked, CleanupBatchSize: cfg.batch, Logger: quiet})
	if err != nil {
		t.Fatalf("NewSQLite: %v", err)
	}
	if err := ib.Migrate(testCtx(t)); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	for _, ddl := range []string{
		`CREATE TABLE effects (n INTEGER PRIMARY KEY, message_id TEXT NOT NULL, note TEXT NOT NULL DEFAULT '') STRICT`,
		`CREATE TABLE invoices (order_id TEXT PRIMARY KEY) STRICT`,
	} {
		if _, err := db.ExecContext(testCtx(t), ddl); err != nil {
			t.Fatalf("%s: %v", ddl, err)
		}
	}
	return &sqliteTarget{SQLiteInbox: ib, db: db}
}

// openSQLite opens path with sqlitestore.Open and closes it when the test
// ends.
func openSQLite(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sqlitestore.Open(testCtx(t), path)
	if err != nil {
		t.Fatalf("sqlitestore.Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// sqliteWriter writes with a database/sql transaction.
type sqliteWriter struct {
	ctx context.Context
	tx  *sql.Tx
}

func (w sqliteWriter) effect(m inbox.Message) error {
	_, err := w.tx.ExecContext(w.ctx, "INSERT INTO effects (message_id) VALUES (?)", m.ID.String())
	return err
}

func (w sqliteWriter) invoice(orderID string) error {
	_, err := w.tx.ExecContext(w.ctx, "INSERT INTO invoices (order_id) VALUES (?)", orderID)
	return err
}

func (s *sqliteTarget) fn(h handler) inbox.SQLHandlerFunc {
	if h == nil {
		return nil
	}
	return func(ctx context.Context, tx *sql.Tx, m inbox.Message) error { return h(ctx, m, sqliteWriter{ctx, tx}) }
}

func (s *sqliteTarget) handle(ctx context.Context, consumer string, m inbox.Message, h handler) (inbox.Result, error) {
	s.entered.Add(1)
	return s.Handle(ctx, consumer, m, s.fn(h))
}

func (s *sqliteTarget) replay(ctx context.Context, consumer string, id uuid.UUID, h handler) (inbox.Result, error) {
	return s.Replay(ctx, consumer, id, s.fn(h))
}

func (s *sqliteTarget) bind(h handler) *inbox.Bound { return s.Bind(s.fn(h)) }

func (s *sqliteTarget) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := s.db.QueryRowContext(testCtx(t), query, args...).Scan(&n); err != nil {
		t.Fatalf("count %q: %v", query, err)
	}
	return n
}

func (s *sqliteTarget) effects(t *testing.T, id uuid.UUID) int {
	return s.count(t, "SELECT count(*) FROM effects WHERE message_id = ?", id.String())
}

func (s *sqliteTarget) marked(t *testing.T, consumer string, id uuid.UUID) bool {
	return s.count(t, "SELECT count(*) FROM inbox_processed WHERE consumer = ? AND message_id = ?", consumer, id.String()) == 1
}

func (s *sqliteTarget) processed(t *testing.T) int {
	return s.count(t, "SELECT count(*) FROM inbox_processed")
}

func (s *sqliteTarget) backdate(t *testing.T, age time.Duration, ids ...uuid.UUID) {
	t.Helper()
	for _, id := range ids {
		_, err := s.db.ExecContext(testCtx(t),
			"UPDATE inbox_processed SET processed_at = CAST(unixepoch('now', 'subsec') * 1000 AS INTEGER) - ? WHERE message_id = ?",
			age.Milliseconds(), id.String())
		if err != nil {
			t.Fatalf("backdate: %v", err)
		}
	}
}

func (s *sqliteTarget) backdateParked(t *testing.T, column string, age time.Duration, ids ...uuid.UUID) {
	t.Helper()
	for _, id := range ids {
		_, err := s.db.ExecContext(testCtx(t),
			"UPDATE inbox_parked SET "+column+" = CAST(unixepoch('now', 'subsec') * 1000 AS INTEGER) - ? WHERE id = ?",
			age.Milliseconds(), id.String())
		if err != nil {
			t.Fatalf("backdate parked: %v", err)
		}
	}
}

// overlap waits until n other deliveries called Handle, then gives them a
// moment to queue for the write lock the caller's transaction holds. The
// lock queue cannot be observed from outside, so this is a best effort; the
// tests' assertions hold whatever the interleaving.
func (s *sqliteTarget) overlap(ctx context.Context, n int) error {
	for s.entered.Load() < int32(n+1) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d deliveries entered Handle, want %d: %w", s.entered.Load(), n+1, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
	time.Sleep(20 * time.Millisecond)
	return nil
}

// quiet drops the inboxes' logs in tests.
var quiet = slog.New(slog.DiscardHandler)

package pgstore_test

import (
	"context"
	"database/sql"
	"errors"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgstoretest"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// fullMessage sets every field, with a binary payload.
func fullMessage() outbox.Message {
	return outbox.Message{
		ID:            uuid.New(),
		AggregateType: "Order",
		AggregateID:   "order-42",
		EventType:     "OrderPlaced",
		EventVersion:  3,
		Topic:         "orders.v1",
		Payload:       []byte{0x00, 0xff, 0x10, 'x', 0x00},
		ContentType:   "application/octet-stream",
		Headers:       map[string]string{"tenant": "acme", "x-priority": "high ünicode"},
		CorrelationID: "corr-1",
		CausationID:   "cmd-7",
		TraceParent:   "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	}
}

// assertRoundTrip checks that the stored record has m's fields and is a
// fresh PENDING message.
func assertRoundTrip(t *testing.T, got outbox.Record, m outbox.Message) {
	t.Helper()
	if !reflect.DeepEqual(got.Message, m) {
		t.Errorf("stored message = %+v\nwant %+v", got.Message, m)
	}
	if got.Status != outbox.StatusPending || got.Attempts != 0 || got.Seq <= 0 ||
		got.CreatedAt.IsZero() || got.NextAttemptAt.IsZero() || !got.PublishedAt.IsZero() ||
		got.LeaseOwner != "" || !got.LeaseExpiresAt.IsZero() || got.LastError != "" {
		t.Errorf("stored state = %+v, want a fresh PENDING message", got)
	}
}

func TestEnqueue_CommittedIsVisibleWithAllFields(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := pgstoretest.Context(t)
	m := fullMessage()
	err := pgx.BeginFunc(ctx, b.Pool, func(tx pgx.Tx) error { return b.Store.Enqueue(ctx, tx, m) })
	if err != nil {
		t.Fatal(err)
	}
	assertRoundTrip(t, b.Get(t, m.ID), m)
}

func TestEnqueue_RolledBackIsGone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := pgstoretest.Context(t)
	m := fullMessage()
	tx, err := b.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Store.Enqueue(ctx, tx, m); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Store.Get(ctx, m.ID); !errors.Is(err, pgstore.ErrNotFound) {
		t.Errorf("Get after rollback: error = %v, want ErrNotFound", err)
	}
	if n := b.Count(t); n != 0 {
		t.Errorf("%d rows after rollback, want 0", n)
	}
}

func TestEnqueue_FillsDefaults(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := pgstoretest.Msg("Order", "1")
	b.Enqueue(t, m)
	got := b.Get(t, m.ID)
	if got.EventVersion != 1 || got.ContentType != outbox.ContentTypeJSON || got.Headers != nil || got.Topic != "" {
		t.Errorf("defaults: version %d, content type %q, headers %v, topic %q", got.EventVersion, got.ContentType, got.Headers, got.Topic)
	}
}

func openSQL(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestSQLEnqueue_CommittedIsVisible(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := pgstoretest.Context(t)
	db := openSQL(t) // search_path is the default: queries are schema-qualified
	m, m2 := fullMessage(), pgstoretest.Msg("Order", "2")
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Store.SQL().Enqueue(ctx, tx, m, m2); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	assertRoundTrip(t, b.Get(t, m.ID), m)
	if got := b.Get(t, m2.ID); got.Seq <= b.Get(t, m.ID).Seq {
		t.Errorf("second message seq %d not after first", got.Seq)
	}
}

func TestSQLEnqueue_RolledBackIsGone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := pgstoretest.Context(t)
	db := openSQL(t)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Store.SQL().Enqueue(ctx, tx, fullMessage()); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := b.Count(t); n != 0 {
		t.Errorf("%d rows after rollback, want 0", n)
	}
}

// countingTx is a transaction that counts its Exec calls and forwards
// them to Tx (with no Tx, it runs nothing).
type countingTx struct {
	pgx.Tx
	calls int
}

func (c *countingTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c.calls++
	if c.Tx == nil {
		return pgconn.CommandTag{}, errors.New("countingTx: no transaction")
	}
	return c.Tx.Exec(ctx, sql, args...)
}

func TestEnqueue_InvalidMessageWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := pgstoretest.Context(t)
	bad := pgstoretest.Msg("Order", "")
	msgs := []outbox.Message{pgstoretest.Msg("Order", "1"), bad, pgstoretest.Msg("Order", "3")}
	err := pgx.BeginFunc(ctx, b.Pool, func(tx pgx.Tx) error {
		ce := &countingTx{Tx: tx}
		err := b.Store.Enqueue(ctx, ce, msgs...)
		if ce.calls != 0 {
			t.Errorf("Enqueue ran %d statements for an invalid batch, want 0", ce.calls)
		}
		var ve *outbox.ValidationError
		if !errors.As(err, &ve) || ve.Index != 1 || ve.Field != "aggregateId" {
			t.Errorf("error = %v, want ValidationError at index 1, field aggregateId", err)
		}
		if !errors.Is(err, outbox.ErrInvalidMessage) {
			t.Errorf("error %v does not wrap ErrInvalidMessage", err)
		}
		return nil // commit anyway
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := b.Count(t); n != 0 {
		t.Errorf("%d rows after an invalid batch was committed, want 0", n)
	}
}

func TestEnqueue_RejectsWhatColumnsCannotHold(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := pgstoretest.Context(t)
	withNUL := pgstoretest.Msg("Order", "1")
	withNUL.Headers = map[string]string{"h": "a\x00b"}
	bigVersion := pgstoretest.Msg("Order", "1")
	bigVersion.EventVersion = 1 << 40
	for _, tc := range []struct {
		m     outbox.Message
		field string
	}{{withNUL, `headers["h"]`}, {bigVersion, "eventVersion"}} {
		ce := &countingTx{}
		err := b.Store.Enqueue(ctx, ce, tc.m)
		var ve *outbox.ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field || ce.calls != 0 {
			t.Errorf("error = %v after %d statements, want ValidationError on %s before any", err, ce.calls, tc.field)
		}
	}
}

func TestEnqueue_NoMessagesRunsNoStatement(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ce := &countingTx{}
	if err := b.Store.Enqueue(pgstoretest.Context(t), ce); err != nil || ce.calls != 0 {
		t.Errorf("Enqueue() = %v after %d statements, want nil after 0", err, ce.calls)
	}
}

// queryCounter is a pgx QueryTracer that counts statements sent.
type queryCounter struct{ n atomic.Int64 }

func (q *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	q.n.Add(1)
	return ctx
}

func (q *queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func TestEnqueue_ThousandMessagesIsOneStatement(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := pgstoretest.Context(t)
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	counter := &queryCounter{}
	cfg.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s, err := pgstore.New(pool, pgstore.Config{Schema: b.Schema})
	if err != nil {
		t.Fatal(err)
	}

	msgs := make([]outbox.Message, 1000)
	for i := range msgs {
		msgs[i] = pgstoretest.Msg("Order", strings.Repeat("x", i%7+1))
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := counter.n.Load()
	if err := s.Enqueue(ctx, tx, msgs...); err != nil {
		t.Fatal(err)
	}
	statements := counter.n.Load() - before
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if statements != 1 {
		t.Errorf("Enqueue of 1,000 messages ran %d statements, want 1", statements)
	}
	if n := b.Count(t); n != 1000 {
		t.Errorf("%d rows, want 1000", n)
	}
}

func TestEnqueue_NilTransactionIsAnErrorAndWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := pgstoretest.Context(t)
	msg := pgstoretest.Msg("Order", "1")
	if err := b.Store.Enqueue(ctx, nil, msg); err == nil || !strings.Contains(err.Error(), "nil transaction") {
		t.Errorf("Enqueue(nil pgx.Tx) = %v, want a nil transaction error", err)
	}
	if err := b.Store.SQL().Enqueue(ctx, nil, msg); err == nil || !strings.Contains(err.Error(), "nil transaction") {
		t.Errorf("SQL().Enqueue(nil *sql.Tx) = %v, want a nil transaction error", err)
	}
	if n := b.Count(t); n != 0 {
		t.Errorf("%d rows after enqueues without a transaction, want 0", n)
	}
}

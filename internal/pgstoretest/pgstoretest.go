// Package pgstoretest sets up PostgreSQL outboxes for the tests of
// store/pgstore and relay/cursor: a [Bundle] holds a migrated
// [pgstore.Store] in a schema of its own (made by internal/pgtest), and in
// cursor mode ([SetupCursor]) relay/cursor's strategy of it as a Queue. The
// package also has helpers that enqueue and look messages up, claim and
// mark sent on a Queue, a [RecordingSink] for relays, and the
// storetest.Harness of a Bundle ([Bundle.Harness]).
//
// It imports store/pgstore and relay/cursor: the internal tests of those
// two packages (package pgstore, package cursor) cannot use it, their
// external test packages (pgstore_test, cursor_test) can.
package pgstoretest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/relay/cursor"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// Bundle is what most tests need: a migrated store in its own schema, and
// in cursor mode ([SetupCursor]) a cursor strategy of it, as a Queue.
type Bundle struct {
	Pool   *pgxpool.Pool // search_path is Schema
	Schema string
	Store  *pgstore.Store
	Cursor *cursor.Queue // nil unless the Bundle is SetupCursor's
}

// Setup returns a Bundle of a migrated store, with the default Config, in
// a new schema that is dropped when the test ends.
func Setup(t testing.TB) *Bundle {
	t.Helper()
	return setup(t, pgstore.Config{})
}

// SetupPartitioned is [Setup] with a table partitioned by interval.
func SetupPartitioned(t testing.TB, interval time.Duration) *Bundle {
	t.Helper()
	return setup(t, pgstore.Config{Partitioning: pgstore.Partitioning{Interval: interval}})
}

// setup migrates a store with cfg (its Schema set to a new one).
func setup(t testing.TB, cfg pgstore.Config) *Bundle {
	t.Helper()
	pool, schema := pgtest.Schema(t)
	cfg.Schema = schema
	s, err := pgstore.New(pool, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := s.Migrate(Context(t)); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return &Bundle{Pool: pool, Schema: schema, Store: s}
}

// Context is a context that ends with the test, bounded to 30 s.
func Context(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Msg returns a valid message of the aggregate with a fresh id.
func Msg(aggregateType, aggregateID string) outbox.Message {
	return outbox.Message{
		ID:            uuid.New(),
		AggregateType: aggregateType,
		AggregateID:   aggregateID,
		EventType:     "Happened",
		Payload:       []byte(`{"n":1}`),
	}
}

// Seqs returns the seqs of recs, in their order.
func Seqs(recs []outbox.Record) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = r.Seq
	}
	return out
}

// Enqueue commits msgs in one transaction and returns their seqs in order.
func (b *Bundle) Enqueue(t testing.TB, msgs ...outbox.Message) []int64 {
	t.Helper()
	ctx := Context(t)
	err := pgx.BeginFunc(ctx, b.Pool, func(tx pgx.Tx) error {
		return b.Store.Enqueue(ctx, tx, msgs...)
	})
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	seqs := make([]int64, len(msgs))
	for i, m := range msgs {
		seqs[i] = b.Get(t, m.ID).Seq
	}
	return seqs
}

// Get returns the store's record of the message with the event id.
func (b *Bundle) Get(t testing.TB, id uuid.UUID) outbox.Record {
	t.Helper()
	r, err := b.Store.Get(Context(t), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return r
}

// IDOf returns the event id of the message with seq.
func (b *Bundle) IDOf(t testing.TB, seq int64) uuid.UUID {
	t.Helper()
	var id uuid.UUID
	if err := b.Pool.QueryRow(Context(t), b.SQL("SELECT id FROM {{schema}}.outbox_messages WHERE seq = $1"), seq).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// Exec runs sql with {{schema}} replaced by the quoted test schema.
func (b *Bundle) Exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	if _, err := b.Pool.Exec(Context(t), b.SQL(sql), args...); err != nil {
		t.Fatalf("exec %q: %v", sql, err)
	}
}

// SQL returns s with {{schema}} replaced by the quoted test schema.
func (b *Bundle) SQL(s string) string {
	return strings.ReplaceAll(s, "{{schema}}", pgx.Identifier{b.Schema}.Sanitize())
}

// Count returns the number of rows in outbox_messages.
func (b *Bundle) Count(t testing.TB) int {
	t.Helper()
	var n int
	if err := b.Pool.QueryRow(Context(t), b.SQL("SELECT count(*) FROM {{schema}}.outbox_messages")).Scan(&n); err != nil {
		t.Fatalf("count: %v", err)
	}
	return n
}

// InsertUnchecked writes m with plain SQL, with headers (JSON text) as
// given, in a transaction that runs with session_replication_role =
// replica, which switches off the table's triggers for it (a superuser's
// setting, as the tests run): migration 015's rule that headers are a JSON
// object of string values does not see the row, as for a row written
// before that migration. It takes its transaction id first, as migration
// 012's trigger (switched off too) would have it do. m.Headers is ignored.
func (b *Bundle) InsertUnchecked(ctx context.Context, m outbox.Message, headers string) error {
	return pgx.BeginFunc(ctx, b.Pool, func(tx pgx.Tx) error {
		for _, st := range []string{"SELECT pg_current_xact_id()", "SET LOCAL session_replication_role = replica"} {
			if _, err := tx.Exec(ctx, st); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, b.SQL(`INSERT INTO {{schema}}.outbox_messages
			(id, aggregate_type, aggregate_id, event_type, event_version, payload, content_type, headers)
			VALUES ($1, $2, $3, $4, 1, $5, 'application/json', $6::jsonb)`),
			m.ID, m.AggregateType, m.AggregateID, m.EventType, m.Payload, headers)
		return err
	})
}

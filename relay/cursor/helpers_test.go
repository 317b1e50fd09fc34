package cursor_test

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

// bundle is what most tests need: a migrated store in its own schema, and
// in cursor mode (setupCursor) a cursor strategy of it, as a Queue.
type bundle struct {
	pool   *pgxpool.Pool
	schema string
	store  *pgstore.Store
	cursor *cursor.Queue
}

func setup(t *testing.T) *bundle {
	t.Helper()
	pool, schema := pgtest.Schema(t)
	s, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := s.Migrate(testCtx(t)); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return &bundle{pool: pool, schema: schema, store: s}
}

// awaitBackend waits, up to within, until some other backend is in the
// state that where describes (a condition on pg_stat_activity, with args),
// and fails the test with what otherwise.
func awaitBackend(t *testing.T, pool *pgxpool.Pool, within time.Duration, what, where string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var found bool
		if err := pool.QueryRow(testCtx(t), `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE pid <> pg_backend_pid() AND (`+where+`))`, args...).Scan(&found); err != nil {
			t.Fatal(err)
		}
		if found {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// testCtx is a context that ends with the test, bounded to 30 s.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// msg returns a valid message of the aggregate with a fresh id.
func msg(aggregateType, aggregateID string) outbox.Message {
	return outbox.Message{
		ID:            uuid.New(),
		AggregateType: aggregateType,
		AggregateID:   aggregateID,
		EventType:     "Happened",
		Payload:       []byte(`{"n":1}`),
	}
}

// enqueue commits msgs in one transaction and returns their seqs in order.
func (b *bundle) enqueue(t *testing.T, msgs ...outbox.Message) []int64 {
	t.Helper()
	ctx := testCtx(t)
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		return b.store.Enqueue(ctx, tx, msgs...)
	})
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	seqs := make([]int64, len(msgs))
	for i, m := range msgs {
		seqs[i] = b.get(t, m.ID).Seq
	}
	return seqs
}

func (b *bundle) get(t *testing.T, id uuid.UUID) outbox.Record {
	t.Helper()
	r, err := b.store.Get(testCtx(t), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return r
}

// exec runs sql with {{schema}} replaced by the quoted test schema.
func (b *bundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := b.pool.Exec(testCtx(t), b.sql(sql), args...); err != nil {
		t.Fatalf("exec %q: %v", sql, err)
	}
}

func (b *bundle) sql(s string) string {
	return strings.ReplaceAll(s, "{{schema}}", pgx.Identifier{b.schema}.Sanitize())
}

// count returns the number of rows in outbox_messages.
func (b *bundle) count(t *testing.T) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(testCtx(t), b.sql("SELECT count(*) FROM {{schema}}.outbox_messages")).Scan(&n); err != nil {
		t.Fatalf("count: %v", err)
	}
	return n
}

func seqsOf(recs []outbox.Record) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = r.Seq
	}
	return out
}

// checkLeaseRejected checks that a claim with a lease below 1ms failed with
// an error that names the field and the rule.
func checkLeaseRejected(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Error("Claim with zero lease succeeded")
	} else if !strings.Contains(err.Error(), "ClaimParams.Lease") || !strings.Contains(err.Error(), "at least 1ms") {
		t.Errorf("Claim with zero lease: error %q does not name the field and the rule", err)
	}
}

// insertUnchecked writes m with plain SQL, with headers (JSON text) as
// given, in a transaction that runs with session_replication_role =
// replica, which switches off the table's triggers for it (a superuser's
// setting, as the tests run): migration 015's rule that headers are a JSON
// object of string values does not see the row, as for a row written
// before that migration. It takes its transaction id first, as migration
// 012's trigger (switched off too) would have it do. m.Headers is ignored.
func (b *bundle) insertUnchecked(ctx context.Context, m outbox.Message, headers string) error {
	return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		for _, st := range []string{"SELECT pg_current_xact_id()", "SET LOCAL session_replication_role = replica"} {
			if _, err := tx.Exec(ctx, st); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, b.sql(`INSERT INTO {{schema}}.outbox_messages
			(id, aggregate_type, aggregate_id, event_type, event_version, payload, content_type, headers)
			VALUES ($1, $2, $3, $4, 1, $5, 'application/json', $6::jsonb)`),
			m.ID, m.AggregateType, m.AggregateID, m.EventType, m.Payload, headers)
		return err
	})
}

// setupCursor is setup with cfg, in cursor mode, with a cursor strategy
// of the store, as a Queue (b.cursor).
func setupCursor(t *testing.T, cfg pgstore.Config) *bundle {
	t.Helper()
	b := setup(t)
	cfg.Schema = b.schema
	if cfg.LeaderLease == 0 {
		// The tests of takeovers wait for the leader's lease: keep it short.
		cfg.LeaderLease = cursorLease
	}
	s, err := pgstore.New(b.pool, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := s.EnableCursor(testCtx(t)); err != nil {
		t.Fatalf("EnableCursor: %v", err)
	}
	b.store, b.cursor = s, cursor.New(s).Queue()
	return b
}

// newCursor returns a cursor strategy (as a Queue) of a new Store on b's
// pool and outbox, with cfg (its Schema set to b's): another relay.
func (b *bundle) newCursor(t *testing.T, cfg pgstore.Config) *cursor.Queue {
	t.Helper()
	cfg.Schema = b.schema
	s, err := pgstore.New(b.pool, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return cursor.New(s).Queue()
}

// setupPartitioned is setup with a table partitioned by interval.
func setupPartitioned(t *testing.T, interval time.Duration) *bundle {
	t.Helper()
	pool, schema := pgtest.Schema(t)
	s, err := pgstore.New(pool, pgstore.Config{Schema: schema, Partitioning: pgstore.Partitioning{Interval: interval}})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := s.Migrate(testCtx(t)); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return &bundle{pool: pool, schema: schema, store: s}
}

package pgstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgstoretest"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// planLog collects the plans auto_explain reports as notices.
type planLog struct {
	mu    sync.Mutex
	plans []string
}

func (l *planLog) add(n *pgconn.Notice) {
	if !strings.Contains(n.Message, "Query Text") {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.plans = append(l.plans, n.Message)
}

// take returns the plans logged since the last take.
func (l *planLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.plans
	l.plans = nil
	return p
}

// explainedPool opens a one-connection pool on schema whose every statement's
// plan (nested ones included) arrives at log, through auto_explain at
// NOTICE level.
func explainedPool(t *testing.T, schema string, log *planLog) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) { log.add(n) }
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		for _, s := range []string{
			"LOAD 'auto_explain'",
			"SET auto_explain.log_min_duration = 0",
			"SET auto_explain.log_level = 'notice'",
			"SET auto_explain.log_nested_statements = on",
		} {
			if _, err := c.Exec(ctx, s); err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// A relay's statements are prepared, and after five executions PostgreSQL
// may keep a generic plan made from the statistics of that moment. A relay
// that starts on an empty (never analyzed) outbox must not keep a plan that
// checks the head of each aggregate with a sequential scan: once the table
// has grown, such a plan reads the whole table for every candidate (a
// claim of 100 took over a second with 20,000 rows). The relay's settings
// (queries/relay_settings.sql) keep every claim and mark on indexes,
// whatever plan was cached when.
func TestRelayStatements_StayOnIndexesAfterPlansWereCachedOnAnEmptyTable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := pgstoretest.Context(t)
	var log planLog
	// FullClaimInterval -1: every claim scans from seq 0 on this one
	// connection, with no probe running beside it.
	s, err := pgstore.New(explainedPool(t, b.Schema, &log), pgstore.Config{Schema: b.Schema, FullClaimInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	p := store.ClaimParams{Owner: "plan-test", Limit: 10, Lease: time.Minute}
	runs := store.ClaimParams{Owner: "plan-test", Limit: 10, Lease: time.Minute, MaxRun: 4, MaxRunBytes: 1 << 20}
	// On the empty table: well past the five executions after which the
	// plan cache may switch to a generic plan.
	for range 12 {
		for _, p := range []store.ClaimParams{p, runs} {
			if _, _, err := s.MarkSentAndClaim(ctx, uuid.New(), []int64{1}, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := s.MarkFailed(ctx, uuid.New(), []store.Failure{{Seq: 1, Error: "x"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Release(ctx, uuid.New(), []int64{1}); err != nil {
		t.Fatal(err)
	}

	// The table grows (no ANALYZE, as with autovacuum not yet run).
	msgs := make([]outbox.Message, 5000)
	for i := range msgs {
		msgs[i] = pgstoretest.Msg("Order", fmt.Sprint(i%1000))
	}
	if err := pgx.BeginFunc(ctx, b.Pool, func(tx pgx.Tx) error { return b.Store.Enqueue(ctx, tx, msgs...) }); err != nil {
		t.Fatal(err)
	}
	log.take()

	_, c, err := s.MarkSentAndClaim(ctx, uuid.Nil, nil, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Records) != 10 {
		t.Fatalf("claimed %d messages, want 10", len(c.Records))
	}
	_, rc, err := s.MarkSentAndClaim(ctx, uuid.Nil, nil, runs)
	if err != nil {
		t.Fatal(err)
	}
	if len(rc.Records) != 10 {
		t.Fatalf("claimed %d messages as runs, want 10", len(rc.Records))
	}
	seqs := pgstoretest.Seqs(c.Records)
	if _, _, err := s.MarkSentAndClaim(ctx, c.Token, seqs[:5], p); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MarkFailed(ctx, c.Token, []store.Failure{{Seq: seqs[5], Error: "x"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Release(ctx, c.Token, seqs[6:]); err != nil {
		t.Fatal(err)
	}

	plans := log.take()
	seen := map[string]bool{}
	stmts := []string{"Store.Claim:", "Store.Claim of runs", "Store.MarkSent", "Store.MarkFailed", "Store.Release"}
	for _, plan := range plans {
		for _, stmt := range stmts {
			if strings.Contains(plan, "-- "+stmt) {
				seen[stmt] = true
			}
		}
		if strings.Contains(plan, "Seq Scan on outbox_messages") {
			t.Errorf("a relay statement scans the outbox table sequentially:\n%s", plan)
		}
	}
	for _, stmt := range stmts {
		if !seen[stmt] {
			t.Errorf("no plan of %s was logged (%d plans); the test sees nothing", stmt, len(plans))
		}
	}
}

package cdc_test

import (
	"context"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/internal/leaktest"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/relay/cdc"
)

// A CDC relay started with a context that never ends, and stopped, leaves
// no connection open (its replication connection closed, none of its
// pool's connections held, no other connection made) and no goroutine
// running. Not parallel: the goroutine check counts the whole test
// process's goroutines. The sink acknowledges in the caller's goroutine:
// the Kafka client's goroutines are the client's, not the relay's.
func TestRelay_StartStop_LeavesNoConnectionOrGoroutine(t *testing.T) {
	e := newEnv(t, broker.Config{})
	app := "leak_" + e.schema
	pool := pgtest.NamedPool(t, e.schema, app)
	s := &ackSink{}
	cfg := e.config(s)
	cfg.Pool, cfg.ConnString = pool, withApplicationName(t, pgtest.URL(), app+"_repl")
	r, err := cdc.New(cfg)
	if err != nil {
		t.Fatal(err)
	}

	before := leaktest.Snapshot()
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.waitLeader(r, 30*time.Second)
	for i := range 10 {
		e.enqueue(seqMessage(fmtAgg(i), 0))
	}
	e.waitCount(outbox.StatusSent, 10, 30*time.Second)
	if n := backendsNamed(t, e.pool, app+"_repl"); n != 1 {
		t.Fatalf("%d replication connections while streaming, want 1", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := pool.Stat()
		repl, own := backendsNamed(t, e.pool, app+"_repl"), backendsNamed(t, e.pool, app)
		if repl == 0 && st.AcquiredConns() == 0 && own == int(st.TotalConns()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after Stop: %d replication connections, %d of the pool's connections acquired, %d backends for the pool's %d connections; want 0, 0 and as many",
				repl, st.AcquiredConns(), own, st.TotalConns())
		}
		time.Sleep(20 * time.Millisecond)
	}
	leaktest.Check(t, before, 10*time.Second)
	if s.acked.Load() < 10 {
		t.Fatalf("%d messages acknowledged, want 10", s.acked.Load())
	}
}

// ackSink acknowledges every record at once.
type ackSink struct{ acked atomic.Int64 }

func (s *ackSink) Publish(_ context.Context, recs []outbox.Record) []error {
	s.acked.Add(int64(len(recs)))
	return make([]error, len(recs))
}

func (*ackSink) Close() error { return nil }

// withApplicationName returns the connection URL u with application_name
// set to name.
func withApplicationName(t *testing.T, u, name string) string {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := parsed.Query()
	q.Set("application_name", name)
	parsed.RawQuery = q.Encode()
	return parsed.String()
}

// backendsNamed counts the backends whose application_name is app.
func backendsNamed(t *testing.T, pool *pgxpool.Pool, app string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(),
		"SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

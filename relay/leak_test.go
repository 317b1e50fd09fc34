package relay_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox/internal/leaktest"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/relay/cursor"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// A relay started with a context that never ends, and stopped, leaves no
// connection open (its listening connection closed, none of the store's
// pool's connections held, no other connection made) and no goroutine
// running, in claim mode and in cursor mode. Not parallel: the goroutine
// check counts the whole test process's goroutines.
func TestRelay_StartStop_LeavesNoConnectionOrGoroutine(t *testing.T) {
	for _, mode := range []struct {
		name   string
		cursor bool
	}{{"claim", false}, {"cursor", true}} {
		t.Run(mode.name, func(t *testing.T) {
			admin, schema := pgtest.Schema(t)
			app := "leak_" + schema
			pool := pgtest.NamedPool(t, schema, app)
			st, err := pgstore.New(pool, pgstore.Config{Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := st.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			if mode.cursor {
				if err := st.EnableCursor(ctx); err != nil {
					t.Fatal(err)
				}
			}
			b := &bundle{pool: pool, store: st, schema: schema}
			for i := range 10 {
				b.enqueue(t, msg(fmt.Sprintf("L-%d", i), 0))
			}
			s := &fakeSink{}
			cfg := fastConfig(b, s)
			if mode.cursor {
				cfg.Store, cfg.Strategy = nil, cursor.New(st)
			}
			cfg.Logger = testLogger(t)
			r, err := relay.New(cfg)
			if err != nil {
				t.Fatal(err)
			}

			before := leaktest.Snapshot()
			if err := r.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			eventually(t, 30*time.Second, "the relay publishes the messages and listens", func() bool {
				_, published := s.snapshot()
				return len(published) == 10 && listeners(t, admin, schema) == 1
			})
			stopCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			if err := r.Stop(stopCtx); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			waitNoConnections(t, admin, pool, schema, app)
			leaktest.Check(t, before, 10*time.Second)
		})
	}
}

// waitNoConnections waits until no backend listens for schema's store, no
// connection of pool is acquired, and the backends named app are pool's
// own connections, and fails t if that is not so within 10s.
func waitNoConnections(t *testing.T, admin, pool *pgxpool.Pool, schema, app string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := pool.Stat()
		l, n := listeners(t, admin, schema), backends(t, admin, app)
		if l == 0 && st.AcquiredConns() == 0 && n == int(st.TotalConns()) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after Stop: %d listening connections, %d of the pool's connections acquired, %d backends for the pool's %d connections; want 0, 0 and as many",
				l, st.AcquiredConns(), n, st.TotalConns())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// listeners counts the backends listening for schema's store
// (pgstore.ListenApplicationName, LISTEN on "outbox_" + schema).
func listeners(t *testing.T, admin *pgxpool.Pool, schema string) int {
	t.Helper()
	var n int
	err := admin.QueryRow(context.Background(),
		"SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND query = $2",
		pgstore.ListenApplicationName, "LISTEN "+pgx.Identifier{"outbox_" + schema}.Sanitize()).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// backends counts the backends whose application_name is app.
func backends(t *testing.T, admin *pgxpool.Pool, app string) int {
	t.Helper()
	var n int
	if err := admin.QueryRow(context.Background(),
		"SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

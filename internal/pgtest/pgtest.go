// Package pgtest gives each test its own PostgreSQL schema on the server at
// TEST_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test), and
// pools through PgBouncer in transaction pooling mode at TEST_PGBOUNCER_URL
// (default postgres://postgres@127.0.0.1:6432/test, started by
// .ci/pgbouncer.sh). A test fails, never skips, when the server or PgBouncer
// cannot be reached.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultURL is used when TEST_DATABASE_URL is not set.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// URL returns the test database URL.
func URL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

var unsafe = regexp.MustCompile(`[^a-z0-9_]+`)

// NewSchemaName returns a fresh schema name derived from the test's name.
func NewSchemaName(t testing.TB) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := unsafe.ReplaceAllString(strings.ToLower(t.Name()), "_")
	if len(name) > 40 {
		name = name[:40]
	}
	return "t_" + name + "_" + hex.EncodeToString(b)
}

// Schema creates an empty schema for the test and drops it when the test
// ends. It returns a pool whose search_path is that schema, and the schema
// name.
func Schema(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	schema := NewSchemaName(t)
	admin, err := pgx.Connect(ctx, URL())
	if err != nil {
		t.Fatalf("pgtest: PostgreSQL unreachable at %s (set TEST_DATABASE_URL): %v", URL(), err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, URL())
		if err != nil {
			t.Logf("pgtest: drop schema %s: %v", schema, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Logf("pgtest: drop schema %s: %v", schema, err)
		}
	})
	pool := Pool(t, schema)
	return pool, schema
}

// MaxPoolsPerTest bounds the pools one test opens with Pool (Schema opens
// one as well). Every pool stays open until its test ends, so a helper
// that opened one per call would hold a connection per call, and
// max_connections is shared by every test package running at the time:
// such a helper, called in a loop, once used up all 300 of them in CI.
const MaxPoolsPerTest = 16

var (
	poolsMu sync.Mutex
	pools   = map[testing.TB]int{} // pools open per test
)

// countPool counts a pool of t and fails t beyond MaxPoolsPerTest.
func countPool(t testing.TB) {
	t.Helper()
	poolsMu.Lock()
	pools[t]++
	n := pools[t]
	poolsMu.Unlock()
	if n == 1 {
		t.Cleanup(func() {
			poolsMu.Lock()
			delete(pools, t)
			poolsMu.Unlock()
		})
	}
	if n > MaxPoolsPerTest {
		t.Fatalf("pgtest: this test opened %d pools, more than MaxPoolsPerTest (%d); each holds its connections until the test ends: open one and share it", n, MaxPoolsPerTest)
	}
}

// Pool opens a new pool on the test database with search_path set to schema
// and closes it when the test ends. A test may open at most
// MaxPoolsPerTest of them.
func Pool(t testing.TB, schema string) *pgxpool.Pool {
	t.Helper()
	return NamedPool(t, schema, "")
}

// NamedPool is Pool with the connections' application_name set to name (if
// not empty), so that a test can find them in pg_stat_activity.
func NamedPool(t testing.TB, schema, name string) *pgxpool.Pool {
	t.Helper()
	countPool(t)
	cfg, err := pgxpool.ParseConfig(URL())
	if err != nil {
		t.Fatalf("pgtest: parse %s: %v", URL(), err)
	}
	if name != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = name
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = 8
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("pgtest: PostgreSQL unreachable at %s (set TEST_DATABASE_URL): %v", URL(), err)
	}
	t.Cleanup(pool.Close)
	return pool
}

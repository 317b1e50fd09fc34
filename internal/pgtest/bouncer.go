package pgtest

import (
	"context"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultBouncerURL is used when TEST_PGBOUNCER_URL is not set: the
// PgBouncer that .ci/pgbouncer.sh starts in front of the test database, in
// transaction pooling mode.
const DefaultBouncerURL = "postgres://postgres@127.0.0.1:6432/test?sslmode=disable"

// BouncerURL returns the URL of the test database through PgBouncer in
// transaction pooling mode, with pgx's default_query_exec_mode set to mode
// (one of pgx's values: "exec", "simple_protocol", "cache_describe", ...).
// An empty mode leaves the URL as it is.
func BouncerURL(t testing.TB, mode string) string {
	t.Helper()
	raw := os.Getenv("TEST_PGBOUNCER_URL")
	if raw == "" {
		raw = DefaultBouncerURL
	}
	if mode == "" {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("pgtest: TEST_PGBOUNCER_URL must be a URL: %v", err)
	}
	q := u.Query()
	q.Set("default_query_exec_mode", mode)
	u.RawQuery = q.Encode()
	return u.String()
}

// BouncerPool opens a pool through PgBouncer (see [BouncerURL]) with
// default_query_exec_mode set to mode, and closes it when the test ends. It
// counts towards MaxPoolsPerTest. A test fails, never skips, when PgBouncer
// cannot be reached. The pool sets no search_path: PgBouncer refuses
// startup parameters it does not track, so statements name their schema.
func BouncerPool(t testing.TB, mode string) *pgxpool.Pool {
	t.Helper()
	countPool(t)
	u := BouncerURL(t, mode)
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		t.Fatalf("pgtest: parse PgBouncer URL: %v", err)
	}
	cfg.MaxConns = 8
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("pgtest: connect to PgBouncer: %v", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		t.Fatalf("pgtest: PgBouncer unreachable at %s (start it with .ci/pgbouncer.sh start, or set TEST_PGBOUNCER_URL): %v", u, err)
	}
	t.Cleanup(pool.Close)
	return pool
}

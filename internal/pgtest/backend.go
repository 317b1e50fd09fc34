package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// AwaitBackend waits, up to within, until some backend other than the
// querying one is in the state that where describes (a condition on
// pg_stat_activity, with args), and fails the test with what otherwise.
func AwaitBackend(t testing.TB, pool *pgxpool.Pool, within time.Duration, what, where string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	deadline := time.Now().Add(within)
	for {
		var found bool
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
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

package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// PostgreSQL's errors about pgx's cached statements, which a pooler in
// transaction mode causes, are explained with the fix; the same errors
// about other statements, and other errors, are left alone.
func TestExplainPoolerError_NamesTheFixForPgxStatementCacheErrors(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Schema(t)
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// Real server errors: the names are those pgx gives cached statements
	// (stmtcache_ and a hash) and one of an application's.
	serverErr := func(sql string) error {
		_, err := conn.Exec(ctx, sql)
		if err == nil {
			t.Fatalf("%s succeeded", sql)
		}
		return err
	}
	missing := serverErr("EXECUTE stmtcache_0123456789abcdef")
	if _, err := conn.Exec(ctx, "PREPARE stmtcache_fedcba9876543210 AS SELECT 1"); err != nil {
		t.Fatal(err)
	}
	exists := serverErr("PREPARE stmtcache_fedcba9876543210 AS SELECT 1")
	if _, err := conn.Exec(ctx, "DEALLOCATE stmtcache_fedcba9876543210"); err != nil {
		t.Fatal(err)
	}
	appMissing := serverErr("EXECUTE my_statement")
	other := serverErr("SELECT 1/0")

	for _, tc := range []struct {
		name    string
		err     error
		explain bool
	}{
		{"pgx statement does not exist", missing, true},
		{"pgx statement already exists", exists, true},
		{"wrapped", fmt.Errorf("ops: stats: %w", exists), true},
		{"an application's statement", appMissing, false},
		{"another error", other, false},
		{"nil", nil, false},
	} {
		got := pgstore.ExplainPoolerError(tc.err)
		if errors.Is(got, pgstore.ErrTransactionPooler) != tc.explain {
			t.Errorf("%s: ExplainPoolerError(%v) = %v; explained: %v, want %v", tc.name, tc.err, got, !tc.explain, tc.explain)
		}
		if tc.err != nil && !errors.Is(got, tc.err) {
			t.Errorf("%s: the explained error does not wrap the original", tc.name)
		}
		if again := pgstore.ExplainPoolerError(got); tc.explain && again.Error() != got.Error() {
			t.Errorf("%s: explained twice: %v", tc.name, again)
		}
	}
}

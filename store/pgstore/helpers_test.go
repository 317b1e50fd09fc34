package pgstore_test

import (
	"testing"
	"time"

	"github.com/outbox-dev/outbox/internal/pgstoretest"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// bundle is a pgstoretest.Bundle with the helpers of this package's tests.
type bundle struct{ *pgstoretest.Bundle }

// setup is pgstoretest.Setup.
func setup(t *testing.T) *bundle {
	t.Helper()
	return &bundle{pgstoretest.Setup(t)}
}

// setupPartitioned is pgstoretest.SetupPartitioned.
func setupPartitioned(t *testing.T, interval time.Duration) *bundle {
	t.Helper()
	return &bundle{pgstoretest.SetupPartitioned(t, interval)}
}

// setupCursor is pgstoretest.SetupCursor.
func setupCursor(t *testing.T, cfg pgstore.Config) *bundle {
	t.Helper()
	return &bundle{pgstoretest.SetupCursor(t, cfg)}
}

// dbNow is the database clock.
func (b *bundle) dbNow(t *testing.T) time.Time {
	t.Helper()
	var now time.Time
	if err := b.Pool.QueryRow(pgstoretest.Context(t), "SELECT clock_timestamp()").Scan(&now); err != nil {
		t.Fatalf("now: %v", err)
	}
	return now
}

package sqlitestore_test

import (
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/store/sqlitestore"
)

func appliedVersions(t *testing.T, b *bundle, prefix string) []int {
	t.Helper()
	rows, err := b.db.QueryContext(testCtx(t), `SELECT version FROM "`+prefix+`migrations" ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var vs []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	return vs
}

func TestMigrate_TwiceRecordsEachVersionOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if err := b.store.Migrate(testCtx(t)); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	if got, want := len(appliedVersions(t, b, "outbox_")), len(sqlitestore.Migrations()); got != want {
		t.Errorf("%d versions recorded, want %d", got, want)
	}
}

// Several processes starting at once each run Migrate; here, handles of
// their own.
func TestMigrate_ConcurrentRecordsEachVersionOnce(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "app.db")
	var wg sync.WaitGroup
	for range 4 {
		db := open(t, path)
		s, err := sqlitestore.New(db, sqlitestore.Config{})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if err := s.Migrate(testCtx(t)); err != nil {
				t.Errorf("Migrate: %v", err)
			}
		})
	}
	wg.Wait()
	b := &bundle{db: open(t, path)}
	if got, want := len(appliedVersions(t, b, "outbox_")), len(sqlitestore.Migrations()); got != want {
		t.Errorf("%d versions recorded, want %d", got, want)
	}
}

// Two stores with different prefixes share a file and nothing else.
func TestNew_TablePrefixSeparatesOutboxes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other, err := sqlitestore.New(b.db, sqlitestore.Config{TablePrefix: "billing_outbox_"})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Migrate(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	m := msg("Order", "1")
	if err := enqueue(testCtx(t), b.db, other, m); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Get(testCtx(t), m.ID); !errors.Is(err, sqlitestore.ErrNotFound) {
		t.Errorf("Get in the default outbox = %v, want ErrNotFound", err)
	}
	if got, err := other.Get(testCtx(t), m.ID); err != nil || got.Status != outbox.StatusPending {
		t.Errorf("Get in billing_outbox_ = %+v, %v", got, err)
	}
}

func TestNew_RejectsInvalidConfig(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		cfg   sqlitestore.Config
		field string
	}{
		{sqlitestore.Config{TablePrefix: `x"; DROP TABLE t; --`}, "TablePrefix"},
		{sqlitestore.Config{TablePrefix: "Outbox_"}, "TablePrefix"},
		{sqlitestore.Config{TablePrefix: "1outbox_"}, "TablePrefix"},
		{sqlitestore.Config{TablePrefix: strings.Repeat("a", 41)}, "TablePrefix"},
		{sqlitestore.Config{TablePrefix: "sqlite_"}, "TablePrefix"},
		{sqlitestore.Config{Limits: outbox.Limits{MaxPayloadBytes: -1}}, "Limits.MaxPayloadBytes"},
		{sqlitestore.Config{Limits: outbox.Limits{MaxHeaders: -1}}, "Limits.MaxHeaders"},
		{sqlitestore.Config{Limits: outbox.Limits{MaxHeaderValueBytes: -1}}, "Limits.MaxHeaderValueBytes"},
	} {
		_, err := sqlitestore.New(b.db, tc.cfg)
		if !errors.Is(err, sqlitestore.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("New(%+v) = %v, want ErrInvalidConfig naming %s", tc.cfg, err, tc.field)
		}
	}
	if _, err := sqlitestore.New(nil, sqlitestore.Config{}); err == nil {
		t.Error("New(nil db) succeeded")
	}
	s, err := sqlitestore.New(b.db, sqlitestore.Config{})
	if err != nil || s.TablePrefix() != sqlitestore.DefaultTablePrefix {
		t.Errorf("New with the zero Config: prefix %q, %v; want %q", s.TablePrefix(), err, sqlitestore.DefaultTablePrefix)
	}
}

func TestMigrations_AreNumberedAndTemplated(t *testing.T) {
	t.Parallel()
	ms := sqlitestore.Migrations()
	if len(ms) == 0 {
		t.Fatal("no embedded migrations")
	}
	for i, m := range ms {
		if m.Version != i+1 || m.Name == "" {
			t.Errorf("migration %d: version %d, name %q; want consecutive versions from 1", i, m.Version, m.Name)
		}
		if strings.Contains(m.SQL, "outbox_messages") || !strings.Contains(m.SQL, "{{prefix}}") {
			t.Errorf("migration %03d names tables without {{prefix}}", m.Version)
		}
	}
}

func TestCleanup_RejectsBadArguments(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.store.Cleanup(testCtx(t), -1, 10); err == nil {
		t.Error("Cleanup with a negative age succeeded")
	}
	if _, err := b.store.Cleanup(testCtx(t), 0, 0); err == nil {
		t.Error("Cleanup with batch 0 succeeded")
	}
}

func TestEnqueue_NilTransactionIsAnError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if err := b.store.Enqueue(testCtx(t), nil, msg("Order", "1")); err == nil {
		t.Error("Enqueue with a nil transaction succeeded")
	}
}

package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox/inbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
)

// migrating is one database's side of the Migrate test: newInbox returns an
// inbox on a connection pool of its own, as each process of a service has;
// versions counts the recorded migrations; handle uses the tables.
type migrating struct {
	newInbox func() (interface{ Migrate(context.Context) error }, error)
	versions func(context.Context) (int, error)
	handle   func(context.Context) error
}

func TestMigrate_IsIdempotentAndSafeWhenRunConcurrently(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		prepare func(t *testing.T) migrating
	}{{"postgres", migratingPG}, {"sqlite", migratingSQLite}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db := c.prepare(t)
			ctx := testCtx(t)
			const processes = 4
			errs := make([]error, processes+1)
			var wg sync.WaitGroup
			for i := range processes {
				wg.Go(func() {
					ib, err := db.newInbox()
					if err == nil {
						err = ib.Migrate(ctx)
					}
					errs[i] = err
				})
			}
			wg.Wait()
			if ib, err := db.newInbox(); err != nil {
				errs[processes] = err
			} else {
				errs[processes] = ib.Migrate(ctx) // again, after all
			}
			for _, err := range errs {
				if err != nil {
					t.Errorf("Migrate: %v", err)
				}
			}
			if n, err := db.versions(ctx); err != nil || n != 2 {
				t.Errorf("%d migrations recorded (%v), want 2", n, err)
			}
			if err := db.handle(ctx); err != nil {
				t.Errorf("Handle on the migrated tables: %v", err)
			}
		})
	}
}

// migratingPG migrates a schema that does not exist yet: Migrate creates it.
func migratingPG(t *testing.T) migrating {
	pool, schema := pgtest.Schema(t)
	target := schema + "_ib"
	quoted := pgx.Identifier{target}.Sanitize()
	t.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+quoted+" CASCADE"); err != nil {
			t.Logf("drop schema %s: %v", target, err)
		}
	})
	newInbox := func() (*inbox.Inbox, error) { return inbox.New(pgtest.Pool(t, schema), inbox.Config{Schema: target}) }
	return migrating{
		newInbox: func() (interface{ Migrate(context.Context) error }, error) { return newInbox() },
		versions: func(ctx context.Context) (n int, err error) {
			return n, pool.QueryRow(ctx, "SELECT count(*) FROM "+quoted+".inbox_migrations").Scan(&n)
		},
		handle: func(ctx context.Context) error {
			ib, err := newInbox()
			if err == nil {
				_, err = ib.Handle(ctx, "billing", msg(), nopHandler)
			}
			return err
		},
	}
}

// migratingSQLite migrates tables with a prefix in a new database file.
func migratingSQLite(t *testing.T) migrating {
	path := filepath.Join(t.TempDir(), "app.db")
	// Create the file (in WAL mode) first: Opens racing to create a new
	// file can fail to switch it to WAL with SQLITE_BUSY.
	openSQLite(t, path)
	newInbox := func() (*inbox.SQLiteInbox, error) {
		return inbox.NewSQLite(openSQLite(t, path), inbox.SQLiteConfig{TablePrefix: "billing_", Logger: quiet})
	}
	return migrating{
		newInbox: func() (interface{ Migrate(context.Context) error }, error) { return newInbox() },
		versions: func(ctx context.Context) (n int, err error) {
			return n, openSQLite(t, path).QueryRowContext(ctx, "SELECT count(*) FROM billing_inbox_migrations").Scan(&n)
		},
		handle: func(ctx context.Context) error {
			ib, err := newInbox()
			if err == nil {
				_, err = ib.Handle(ctx, "billing", msg(), func(context.Context, *sql.Tx, inbox.Message) error { return nil })
			}
			return err
		},
	}
}

func TestNew_RejectsBadConfigNamingTheField(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Schema(t)
	db := openSQLite(t, filepath.Join(t.TempDir(), "app.db"))
	pg := func(cfg inbox.Config) func() error {
		return func() error { _, err := inbox.New(pool, cfg); return err }
	}
	lite := func(cfg inbox.SQLiteConfig) func() error {
		return func() error { _, err := inbox.NewSQLite(db, cfg); return err }
	}
	type badConfig struct {
		name  string
		new   func() error
		field string
	}
	cases := []badConfig{
		{"upper-case schema", pg(inbox.Config{Schema: "Inbox"}), "Schema"},
		{"dash in schema", pg(inbox.Config{Schema: "in-box"}), "Schema"},
		{"injected schema", pg(inbox.Config{Schema: `x"; DROP TABLE y; --`}), "Schema"},
		{"pg_ schema", pg(inbox.Config{Schema: "pg_inbox"}), "Schema"},
		{"long schema", pg(inbox.Config{Schema: strings.Repeat("a", 64)}), "Schema"},
		{"upper-case prefix", lite(inbox.SQLiteConfig{TablePrefix: "Billing_"}), "TablePrefix"},
		{"dash in prefix", lite(inbox.SQLiteConfig{TablePrefix: "bill-ing_"}), "TablePrefix"},
		{"injected prefix", lite(inbox.SQLiteConfig{TablePrefix: `x"; DROP TABLE y; --`}), "TablePrefix"},
		{"sqlite_ prefix", lite(inbox.SQLiteConfig{TablePrefix: "sqlite_"}), "TablePrefix"},
		{"long prefix", lite(inbox.SQLiteConfig{TablePrefix: strings.Repeat("a", 41)}), "TablePrefix"},
	}
	// The fields both configs have, with the same rules.
	for _, c := range []struct {
		name                        string
		retention, replayed, parked time.Duration
		batch                       int
		field                       string
	}{
		{"negative retention", -time.Hour, 0, 0, 0, "Retention"},
		{"retention under 1s", time.Millisecond, 0, 0, 0, "Retention"},
		{"negative replayed retention", 0, -time.Hour, 0, 0, "ReplayedRetention"},
		{"replayed retention under 1s", 0, time.Millisecond, 0, 0, "ReplayedRetention"},
		{"negative parked retention", 0, 0, -time.Hour, 0, "ParkedRetention"},
		{"parked retention under 1s", 0, 0, time.Millisecond, 0, "ParkedRetention"},
		{"negative batch", 0, 0, 0, -1, "CleanupBatchSize"},
	} {
		cases = append(cases,
			badConfig{"postgres: " + c.name, pg(inbox.Config{Retention: c.retention, ReplayedRetention: c.replayed,
				ParkedRetention: c.parked, CleanupBatchSize: c.batch}), c.field},
			badConfig{"sqlite: " + c.name, lite(inbox.SQLiteConfig{Retention: c.retention, ReplayedRetention: c.replayed,
				ParkedRetention: c.parked, CleanupBatchSize: c.batch}), c.field})
	}
	for _, c := range cases {
		if err := c.new(); !errors.Is(err, inbox.ErrInvalidConfig) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: error = %v, want ErrInvalidConfig naming %s", c.name, err, c.field)
		}
	}
	if _, err := inbox.New(nil, inbox.Config{}); err == nil {
		t.Error("New(nil pool) succeeded")
	}
	if _, err := inbox.NewSQLite(nil, inbox.SQLiteConfig{}); err == nil {
		t.Error("NewSQLite(nil db) succeeded")
	}
	ib, err := inbox.New(pool, inbox.Config{})
	if err != nil {
		t.Fatalf("New(zero Config): %v", err)
	}
	if ib.Schema() != "inbox" {
		t.Errorf("default schema %q, want inbox", ib.Schema())
	}
	lib, err := inbox.NewSQLite(db, inbox.SQLiteConfig{})
	if err != nil {
		t.Fatalf("NewSQLite(zero SQLiteConfig): %v", err)
	}
	if lib.TablePrefix() != "" {
		t.Errorf("default table prefix %q, want empty", lib.TablePrefix())
	}
}

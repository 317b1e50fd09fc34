package migrate_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox/internal/migrate"
	"github.com/outbox-dev/outbox/internal/migrate/pgmigrate"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/store/sqlitestore"
)

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// runFunc runs a plan of the given migrations, and then (if not nil), on
// one connection.
type runFunc func(ctx context.Context, ms []migrate.Migration, then func(context.Context, migrate.Tx) error) ([]migrate.Migration, error)

// database is one dialect's side of the runner tests: a new, empty
// database, and the runner's plan for it (owner "test", bookkeeping table
// x_migrations).
type database struct {
	// process returns a run on a connection of its own, as each process
	// of a service has.
	process func() runFunc
	// render fills in {{t}}, the table t, in a migration or query.
	render func(string) string
	// ints reads a query whose rows are one integer each; exec runs a
	// statement.
	ints func(ctx context.Context, query string) ([]int, error)
	exec func(ctx context.Context, sql string) error
	// exists counts how many of t and x_migrations (and its schema) exist.
	exists string
	// oldSetup are the statements with which the releases before the
	// runner created the bookkeeping table.
	oldSetup []string
}

// dialects are the databases the runner runs on.
var dialects = []struct {
	name string
	new  func(*testing.T) database
}{{"sqlite", sqliteDatabase}, {"postgres", postgresDatabase}}

// runner is the runFunc of begin and p.
func runner[T migrate.Tx](begin func(context.Context) (T, error), p migrate.Plan) runFunc {
	return func(ctx context.Context, ms []migrate.Migration, then func(context.Context, migrate.Tx) error) ([]migrate.Migration, error) {
		p.Migrations = ms
		if then == nil {
			return migrate.Run(ctx, begin, p, nil)
		}
		return migrate.Run(ctx, begin, p, func(ctx context.Context, tx T) error { return then(ctx, tx) })
	}
}

// reader and writer are a database's ints and exec, through the runner's
// own transactions.
func reader[T migrate.Tx](begin func(context.Context) (T, error)) func(context.Context, string) ([]int, error) {
	return func(ctx context.Context, q string) ([]int, error) {
		tx, err := begin(ctx)
		if err != nil {
			return nil, err
		}
		defer tx.Rollback(ctx)
		return tx.Versions(ctx, q)
	}
}

func writer[T migrate.Tx](begin func(context.Context) (T, error)) func(context.Context, string) error {
	return func(ctx context.Context, q string) error {
		tx, err := begin(ctx)
		if err == nil {
			defer tx.Rollback(ctx)
			if err = tx.Exec(ctx, q); err == nil {
				err = tx.Commit(ctx)
			}
		}
		return err
	}
}

func sqliteDatabase(t *testing.T) database {
	path := filepath.Join(t.TempDir(), "app.db")
	open := func() func(context.Context) (migrate.SQLiteTx, error) {
		db, err := sqlitestore.Open(testCtx(t), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return migrate.SQLite(db)
	}
	db := open() // creates the file in WAL mode before any race
	plan := migrate.Plan{Owner: "test", Table: migrate.Table{Name: "x_migrations"}}
	return database{
		process: func() runFunc { return runner(open(), plan) },
		render:  strings.NewReplacer("{{t}}", "t").Replace,
		ints:    reader(db),
		exec:    writer(db),
		exists:  "SELECT count(*) FROM sqlite_schema WHERE name IN ('t', 'x_migrations')",
		// sqlitestore's migrate_setup.sql, for the table prefix "x_".
		oldSetup: []string{`CREATE TABLE IF NOT EXISTS "x_migrations" (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    -- unix milliseconds
    applied_at INTEGER NOT NULL DEFAULT (CAST(ROUND(unixepoch('now', 'subsec') * 1000) AS INTEGER))
) STRICT`},
	}
}

// postgresDatabase is a schema that does not exist yet: the runner creates
// it.
func postgresDatabase(t *testing.T) database {
	pool, base := pgtest.Schema(t)
	schema := base + "_m"
	q := pgx.Identifier{schema}.Sanitize()
	t.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+q+" CASCADE"); err != nil {
			t.Logf("drop schema %s: %v", schema, err)
		}
	})
	plan := migrate.Plan{Owner: "test", Table: migrate.Table{Schema: schema, Name: "x_migrations"},
		LockKey: migrate.LockKey("outbox.test.migrate:" + schema)}
	db := pgmigrate.Begin(pool)
	return database{
		process: func() runFunc { return runner(pgmigrate.Begin(pgtest.Pool(t, "public")), plan) },
		render:  strings.NewReplacer("{{t}}", q+".t").Replace,
		ints:    reader(db),
		exec:    writer(db),
		exists: "SELECT (SELECT count(*) FROM pg_namespace WHERE nspname = '" + schema + "')::int" +
			" + (to_regclass('" + q + ".t') IS NOT NULL)::int + (to_regclass('" + q + ".x_migrations') IS NOT NULL)::int",
		// pgstore's migrate_setup.sql, with outbox_migrations renamed.
		oldSetup: []string{"CREATE SCHEMA IF NOT EXISTS " + q, "CREATE TABLE IF NOT EXISTS " + q + `.x_migrations (
    version    int         PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`},
	}
}

// counting are migrations that create a table and insert a row each: the
// rows tell how often each was applied.
func (db database) counting() []migrate.Migration {
	return migrate.Render([]migrate.Migration{
		{Version: 1, Name: "create_t", SQL: "CREATE TABLE {{t}} (v INTEGER NOT NULL)"},
		{Version: 2, Name: "two", SQL: "INSERT INTO {{t}} VALUES (2)"},
		{Version: 3, Name: "three", SQL: "INSERT INTO {{t}} VALUES (3)"},
	}, db.render)
}

// want checks that query (rendered) reads want.
func (db database) want(t *testing.T, what, query string, want ...int) {
	t.Helper()
	if got, err := db.ints(testCtx(t), db.render(query)); err != nil || !slices.Equal(got, want) {
		t.Errorf("%s: %v (%v), want %v", what, got, err, want)
	}
}

func versions(ms []migrate.Migration) (vs []int) {
	for _, m := range ms {
		vs = append(vs, m.Version)
	}
	return vs
}

// forEachDialect runs test on a new database of each dialect.
func forEachDialect(t *testing.T, test func(t *testing.T, db database)) {
	t.Parallel()
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			test(t, d.new(t))
		})
	}
}

// Processes that start at once each run the migrations, on connections of
// their own: the lock (PostgreSQL's advisory lock, SQLite's write lock)
// lets each migration be applied once, by one of them, and recorded once;
// the others find them recorded.
func TestRun_ConcurrentRunsApplyEachMigrationOnce(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db database) {
		const processes = 4
		applied := make([][]migrate.Migration, processes)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range processes {
			run := db.process()
			wg.Go(func() {
				<-start
				var err error
				if applied[i], err = run(testCtx(t), db.counting(), nil); err != nil {
					t.Errorf("run %d: %v", i, err)
				}
			})
		}
		close(start)
		wg.Wait()
		var all []int
		for _, a := range applied {
			all = append(all, versions(a)...)
		}
		slices.Sort(all)
		if !slices.Equal(all, []int{1, 2, 3}) {
			t.Errorf("the runs applied versions %v between them, want 1, 2, 3 once each", all)
		}
		db.want(t, "t holds (each insert once)", "SELECT v FROM {{t}} ORDER BY v", 2, 3)
		db.want(t, "the recorded versions", "SELECT version FROM "+db.table()+" ORDER BY version", 1, 2, 3)
		if again, err := db.process()(testCtx(t), db.counting(), nil); err != nil || len(again) != 0 {
			t.Errorf("a run on the migrated database applied %v (%v), want none", versions(again), err)
		}
	})
}

// A failing migration leaves the database as it was, the migrations before
// it in the same run, the bookkeeping table and its schema included, and
// its error names the file; a corrected run then applies them all.
func TestRun_FailingMigrationRollsBackAndNamesTheFile(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db database) {
		bad := db.counting()
		bad[1].SQL = "INSERT INTO no_such_table VALUES (2)"
		applied, err := db.process()(testCtx(t), bad, nil)
		if err == nil || !strings.Contains(err.Error(), "test: migrate: apply 002_two.up.sql: ") ||
			!strings.Contains(err.Error(), "no_such_table") || applied != nil {
			t.Fatalf("Run = %v, %v; want an error naming 002_two.up.sql and the cause, nothing applied", versions(applied), err)
		}
		db.want(t, "what exists of the run after it failed", db.exists, 0)
		applied, err = db.process()(testCtx(t), db.counting(), nil)
		if err != nil || !slices.Equal(versions(applied), []int{1, 2, 3}) {
			t.Errorf("corrected Run = %v, %v; want 1, 2, 3 applied", versions(applied), err)
		}
	})
}

// The user's step runs in the same transaction, after the migrations: it
// sees them, and its failure undoes them.
func TestRun_ThenRunsInTheSameTransaction(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db database) {
		boom := errors.New("boom")
		_, err := db.process()(testCtx(t), db.counting(), func(ctx context.Context, tx migrate.Tx) error {
			if n, err := tx.Versions(ctx, db.render("SELECT v FROM {{t}} ORDER BY v")); err != nil || !slices.Equal(n, []int{2, 3}) {
				t.Errorf("then read %v from t (%v), want the migrations' rows 2, 3", n, err)
			}
			return boom
		})
		if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "test: migrate: ") {
			t.Fatalf("Run = %v; want then's error, wrapped", err)
		}
		db.want(t, "what exists of the run after then failed", db.exists, 0)
	})
}

// A database whose bookkeeping table a release before the runner created
// keeps it: the runner applies only what it does not record, and records
// the rest in it.
func TestRun_KeepsABookkeepingTableOfEarlierReleases(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db database) {
		ms := db.counting()
		for _, s := range append(db.oldSetup, ms[0].SQL, "INSERT INTO "+db.table()+" (version, name) VALUES (1, 'create_t')") {
			if err := db.exec(testCtx(t), s); err != nil {
				t.Fatal(err)
			}
		}
		applied, err := db.process()(testCtx(t), ms, nil)
		if err != nil || !slices.Equal(versions(applied), []int{2, 3}) {
			t.Fatalf("Run = %v, %v; want 2 and 3 applied", versions(applied), err)
		}
		db.want(t, "versions with a name and an applied_at", "SELECT version FROM "+db.table()+
			" WHERE name <> '' AND applied_at IS NOT NULL ORDER BY version", 1, 2, 3)
	})
}

// table is the bookkeeping table's qualified name: {{t}}'s schema (if any)
// and x_migrations.
func (db database) table() string {
	return strings.TrimSuffix(db.render("{{t}}"), "t") + "x_migrations"
}

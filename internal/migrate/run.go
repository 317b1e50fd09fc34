package migrate

import (
	"context"
	"fmt"
)

// Tx is the transaction [Run] works in, in one SQL dialect.
type Tx interface {
	// Lock takes the lock named by key, which serialises the runs of every
	// process on this database, until the transaction ends.
	Lock(ctx context.Context, key int64) error
	// Exec runs a statement.
	Exec(ctx context.Context, sql string, args ...any) error
	// Versions runs a query whose rows are one integer each.
	Versions(ctx context.Context, sql string) ([]int, error)
	// Bookkeeping is the SQL, in the transaction's dialect, of the
	// bookkeeping table t.
	Bookkeeping(t Table) Bookkeeping
	Commit(ctx context.Context) error
	// Rollback ends the transaction without committing; after Commit it
	// does nothing.
	Rollback(ctx context.Context) error
}

// Table names a bookkeeping table. Its columns are version (the primary
// key), name and applied_at.
type Table struct {
	// Schema is the PostgreSQL schema of the table, created with it if
	// absent; empty on SQLite.
	Schema string
	// Name is the table's name: "outbox_migrations".
	Name string
}

// String names t for messages: "schema orders and outbox_migrations" or
// "outbox_migrations".
func (t Table) String() string {
	if t.Schema == "" {
		return t.Name
	}
	return "schema " + t.Schema + " and " + t.Name
}

// Bookkeeping are the statements on a bookkeeping table.
type Bookkeeping struct {
	// Setup creates the table (and its schema) if absent.
	Setup string
	// Applied reads the recorded versions, one a row.
	Applied string
	// Record records one applied migration: its version, then its name.
	Record string
}

// Plan is what one user of the runner migrates, and where it keeps track.
type Plan struct {
	// Owner starts every error message: "pgstore" gives "pgstore: migrate:
	// ...".
	Owner string
	// Table records the applied versions.
	Table Table
	// LockKey is the key [Tx.Lock] takes (see [LockKey]).
	LockKey int64
	// Migrations are the migrations, rendered, in version order.
	Migrations []Migration
}

// Run applies, in one transaction that begin starts, every migration of p
// not yet recorded, in version order, and records it; then, if not nil, it
// runs then in the same transaction (a user's step that must see the
// migrated schema, such as pgstore's partitioning), and commits. It returns
// the migrations it applied: none when the database was up to date. On an
// error nothing is applied; the error names the step, and for a failing
// migration its file.
func Run[T Tx](ctx context.Context, begin func(context.Context) (T, error), p Plan,
	then func(context.Context, T) error) ([]Migration, error) {
	tx, err := begin(ctx)
	if err != nil {
		return nil, p.errorf("begin: %w", err)
	}
	defer tx.Rollback(ctx) // a no-op after Commit

	applied, err := p.apply(ctx, tx)
	if err != nil {
		return nil, err
	}
	if then != nil {
		if err := then(ctx, tx); err != nil {
			return nil, p.errorf("%w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, p.errorf("commit: %w", err)
	}
	return applied, nil
}

// apply is Run's work inside the transaction.
func (p Plan) apply(ctx context.Context, tx Tx) ([]Migration, error) {
	if err := tx.Lock(ctx, p.LockKey); err != nil {
		return nil, p.errorf("take advisory lock: %w", err)
	}
	book := tx.Bookkeeping(p.Table)
	if err := tx.Exec(ctx, book.Setup); err != nil {
		return nil, p.errorf("create %s: %w", p.Table, err)
	}
	versions, err := tx.Versions(ctx, book.Applied)
	if err != nil {
		return nil, p.errorf("read applied versions: %w", err)
	}
	recorded := make(map[int]bool, len(versions))
	for _, v := range versions {
		recorded[v] = true
	}
	var applied []Migration
	for _, m := range p.Migrations {
		if recorded[m.Version] {
			continue
		}
		if err := tx.Exec(ctx, m.SQL); err != nil {
			return nil, p.errorf("apply %s: %w", m.File(), err)
		}
		if err := tx.Exec(ctx, book.Record, m.Version, m.Name); err != nil {
			return nil, p.errorf("record %s: %w", m.File(), err)
		}
		applied = append(applied, m)
	}
	return applied, nil
}

// errorf is an error of p's run: "<owner>: migrate: " and format.
func (p Plan) errorf(format string, args ...any) error {
	return fmt.Errorf(p.Owner+": migrate: "+format, args...)
}

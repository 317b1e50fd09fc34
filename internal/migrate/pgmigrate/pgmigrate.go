// Package pgmigrate runs package migrate's runner on PostgreSQL through
// pgx: its transactions serialise under a transaction-scoped advisory lock.
package pgmigrate

import (
	"context"
	"embed"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox/internal/migrate"
)

//go:embed lock.sql
var lockSQL string

//go:embed setup.sql applied.sql record.sql
var bookkeepingFiles embed.FS

// bookkeeping are PostgreSQL's bookkeeping statements; {{schema}} stands
// for the quoted schema, {{table}} for the qualified table name.
var bookkeeping = migrate.MustReadBookkeeping(bookkeepingFiles, ".")

// Beginner starts transactions: a *pgxpool.Pool, a *pgx.Conn.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Tx is a PostgreSQL transaction for migrate.Run.
type Tx struct{ Tx pgx.Tx }

// Begin begins the transactions of migrate.Run on db.
func Begin(db Beginner) func(context.Context) (Tx, error) {
	return func(ctx context.Context) (Tx, error) {
		tx, err := db.Begin(ctx)
		return Tx{tx}, err
	}
}

// Lock takes the advisory lock key (pg_advisory_xact_lock) until the
// transaction ends; a run that holds it makes the others wait.
func (t Tx) Lock(ctx context.Context, key int64) error {
	_, err := t.Tx.Exec(ctx, lockSQL, key)
	return err
}

// Exec runs a statement (several, separated by ';', without args).
func (t Tx) Exec(ctx context.Context, sql string, args ...any) error {
	_, err := t.Tx.Exec(ctx, sql, args...)
	return err
}

// Versions runs a query whose rows are one int4 each.
func (t Tx) Versions(ctx context.Context, sql string) ([]int, error) {
	rows, err := t.Tx.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	out := make([]int, len(vs))
	for i, v := range vs {
		out[i] = int(v)
	}
	return out, err
}

// Bookkeeping is the SQL of the bookkeeping table t, in schema t.Schema.
func (Tx) Bookkeeping(t migrate.Table) migrate.Bookkeeping {
	return bookkeeping.Replace(strings.NewReplacer(
		"{{schema}}", pgx.Identifier{t.Schema}.Sanitize(),
		"{{table}}", pgx.Identifier{t.Schema, t.Name}.Sanitize()))
}

// Commit commits the transaction.
func (t Tx) Commit(ctx context.Context) error { return t.Tx.Commit(ctx) }

// Rollback rolls the transaction back; after Commit it does nothing.
func (t Tx) Rollback(ctx context.Context) error { return t.Tx.Rollback(ctx) }

// Locked runs fn in a transaction of db that holds the advisory lock key
// from its start, and commits if fn returns nil: for work that must not
// run at once in several processes, such as creating a schema's tables.
func Locked(ctx context.Context, db Beginner, key int64, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if err := (Tx{tx}).Lock(ctx, key); err != nil {
			return fmt.Errorf("take the advisory lock: %w", err)
		}
		return fn(tx)
	})
}

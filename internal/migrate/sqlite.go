package migrate

import (
	"context"
	"database/sql"
	"embed"
	"strings"
)

//go:embed sqlite/*.sql
var sqliteFiles embed.FS

// sqliteBookkeeping are SQLite's bookkeeping statements; {{table}} stands
// for the quoted table name.
var sqliteBookkeeping = MustReadBookkeeping(sqliteFiles, "sqlite")

// SQLiteTx is a SQLite transaction for [Run].
type SQLiteTx struct{ Tx *sql.Tx }

// SQLite begins the transactions of [Run] on db. db must begin its write
// transactions with BEGIN IMMEDIATE, as a *sql.DB from sqlitestore.Open
// does: the write lock they take at once is what serialises runs, so
// [SQLiteTx.Lock] has nothing left to do.
func SQLite(db *sql.DB) func(context.Context) (SQLiteTx, error) {
	return func(ctx context.Context) (SQLiteTx, error) {
		tx, err := db.BeginTx(ctx, nil)
		return SQLiteTx{tx}, err
	}
}

// Lock does nothing: the transaction holds SQLite's write lock already.
func (SQLiteTx) Lock(context.Context, int64) error { return nil }

// Exec runs a statement.
func (t SQLiteTx) Exec(ctx context.Context, sql string, args ...any) error {
	_, err := t.Tx.ExecContext(ctx, sql, args...)
	return err
}

// Versions runs a query whose rows are one integer each.
func (t SQLiteTx) Versions(ctx context.Context, sql string) ([]int, error) {
	rows, err := t.Tx.QueryContext(ctx, sql)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// Bookkeeping is the SQL of the bookkeeping table t.Name (SQLite has no
// schemas: t.Schema must be empty).
func (SQLiteTx) Bookkeeping(t Table) Bookkeeping {
	quoted := `"` + strings.ReplaceAll(t.Name, `"`, `""`) + `"`
	return sqliteBookkeeping.Replace(strings.NewReplacer("{{table}}", quoted))
}

// Commit commits the transaction.
func (t SQLiteTx) Commit(context.Context) error { return t.Tx.Commit() }

// Rollback rolls the transaction back; after Commit it does nothing.
func (t SQLiteTx) Rollback(context.Context) error { return t.Tx.Rollback() }

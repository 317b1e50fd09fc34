// Package txdb is the seam that lets the order system's business logic be
// written once and run on PostgreSQL (pgx) or SQLite (database/sql with
// sqlitestore.Open's settings). A service reads its SQL texts per dialect
// (PostgreSQL's and SQLite's own .sql files) and runs them through [Tx]:
// Exec, QueryRow and Query, inside a write transaction of [DB.InTx].
//
// The SQLite side converts what SQLite lacks, so that the callers pass the
// same Go values on both:
//
//   - time.Time (and *time.Time, nil for NULL) is stored as unix
//     microseconds (INTEGER), and scanned back into time.Time in UTC;
//   - a slice other than []byte ([]string, []int64) is passed as a JSON
//     array, for the SQL to read with json_each; PostgreSQL gets arrays.
//
// No row exists: both dialects give [ErrNoRows]. Money never passes as a
// float: amounts are integers of minor units on both.
package txdb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/store/pgstore"
	"github.com/outbox-dev/outbox/store/sqlitestore"
)

// ErrNoRows is what Row.Scan returns when the query found no row, on both
// dialects.
var ErrNoRows = errors.New("txdb: no rows")

// Dialect names the SQL a [DB] speaks.
type Dialect string

// The dialects.
const (
	PostgreSQL Dialect = "postgres"
	SQLite     Dialect = "sqlite"
)

// Row is one row of QueryRow. Scan gives [ErrNoRows] when there is none.
type Row interface {
	Scan(dest ...any) error
}

// Rows are the rows of Query. Close them when done (Next does at the end).
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Tx runs statements: in a transaction, or (on a [DB]) each on its own.
type Tx interface {
	// Exec runs a statement and returns the number of rows it changed.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	QueryRow(ctx context.Context, query string, args ...any) Row
	Query(ctx context.Context, query string, args ...any) (Rows, error)
}

// DB is a database: statements outside a transaction, and write
// transactions.
type DB interface {
	Tx
	// InTx runs fn in a transaction that commits if fn returns nil and
	// rolls back otherwise. On SQLite it is a write transaction that holds
	// the database's write lock from its start (sqlitestore.Open), which
	// serialises it with every other writer: what FOR UPDATE does on
	// PostgreSQL.
	InTx(ctx context.Context, fn func(Tx) error) error
	// Dialect says which SQL texts to use.
	Dialect() Dialect
}

// Outbox enqueues messages in a transaction of its database.
type Outbox interface {
	Enqueue(ctx context.Context, tx Tx, msgs ...outbox.Message) error
}

// --- PostgreSQL (pgx) ---

// Postgres returns the DB of pool.
func Postgres(pool *pgxpool.Pool) DB { return pgDB{pgConn{pool}, pool} }

// Pgx returns the Tx of a pgx transaction (a handler's, say).
func Pgx(tx pgx.Tx) Tx { return pgConn{tx} }

// PgOutbox enqueues to st in transactions of Pgx or Postgres().InTx.
func PgOutbox(st *pgstore.Store) Outbox { return pgOutbox{st} }

// pgRunner is what a pool and a transaction of pgx have in common.
type pgRunner interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// pgConn is the Tx of a pgx pool or transaction.
type pgConn struct{ r pgRunner }

func (c pgConn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := c.r.Exec(ctx, query, args...)
	return tag.RowsAffected(), err
}

func (c pgConn) QueryRow(ctx context.Context, query string, args ...any) Row {
	return pgRow{c.r.QueryRow(ctx, query, args...)}
}

func (c pgConn) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	rows, err := c.r.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return pgRows{rows}, nil
}

type pgDB struct {
	pgConn
	pool *pgxpool.Pool
}

func (d pgDB) Dialect() Dialect { return PostgreSQL }

func (d pgDB) InTx(ctx context.Context, fn func(Tx) error) error {
	return pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error { return fn(pgConn{tx}) })
}

type pgRow struct{ row pgx.Row }

func (r pgRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNoRows
	}
	return err
}

type pgRows struct{ pgx.Rows }

func (r pgRows) Scan(dest ...any) error { return r.Rows.Scan(dest...) }

type pgOutbox struct{ st *pgstore.Store }

func (o pgOutbox) Enqueue(ctx context.Context, tx Tx, msgs ...outbox.Message) error {
	c, ok := tx.(pgConn)
	ptx, isTx := c.r.(pgx.Tx)
	if !ok || !isTx {
		return fmt.Errorf("txdb: the PostgreSQL outbox needs a PostgreSQL transaction, got %T", tx)
	}
	return o.st.Enqueue(ctx, ptx, msgs...)
}

// --- SQLite (database/sql) ---

// SQLiteDB returns the DB of db, which should come from sqlitestore.Open.
func SQLiteDB(db *sql.DB) DB { return sqlDB{sqlConn{db}, db} }

// SQL returns the Tx of a database/sql transaction on SQLite (a
// handler's, say).
func SQL(tx *sql.Tx) Tx { return sqlConn{tx} }

// SQLiteOutbox enqueues to st in transactions of SQL or SQLiteDB().InTx.
func SQLiteOutbox(st *sqlitestore.Store) Outbox { return sqliteOutbox{st} }

// sqlRunner is what a *sql.DB and a *sql.Tx have in common.
type sqlRunner interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// sqlConn is the Tx of a SQLite *sql.DB or *sql.Tx.
type sqlConn struct{ r sqlRunner }

func (c sqlConn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := c.r.ExecContext(ctx, query, sqliteArgs(args)...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (c sqlConn) QueryRow(ctx context.Context, query string, args ...any) Row {
	return sqlRow{c.r.QueryRowContext(ctx, query, sqliteArgs(args)...)}
}

func (c sqlConn) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	rows, err := c.r.QueryContext(ctx, query, sqliteArgs(args)...)
	if err != nil {
		return nil, err
	}
	return sqlRows{rows}, nil
}

type sqlDB struct {
	sqlConn
	db *sql.DB
}

func (d sqlDB) Dialect() Dialect { return SQLite }

func (d sqlDB) InTx(ctx context.Context, fn func(Tx) error) (err error) {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err := fn(sqlConn{tx}); err != nil {
		return err
	}
	return tx.Commit()
}

type sqlRow struct{ row *sql.Row }

func (r sqlRow) Scan(dest ...any) error {
	err := r.row.Scan(sqliteDest(dest)...)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNoRows
	}
	return err
}

type sqlRows struct{ rows *sql.Rows }

func (r sqlRows) Next() bool             { return r.rows.Next() }
func (r sqlRows) Scan(dest ...any) error { return r.rows.Scan(sqliteDest(dest)...) }
func (r sqlRows) Err() error             { return r.rows.Err() }
func (r sqlRows) Close()                 { _ = r.rows.Close() }

type sqliteOutbox struct{ st *sqlitestore.Store }

func (o sqliteOutbox) Enqueue(ctx context.Context, tx Tx, msgs ...outbox.Message) error {
	c, ok := tx.(sqlConn)
	stx, isTx := c.r.(*sql.Tx)
	if !ok || !isTx {
		return fmt.Errorf("txdb: the SQLite outbox needs a SQLite transaction, got %T", tx)
	}
	return o.st.Enqueue(ctx, stx, msgs...)
}

// sqliteArgs converts the arguments SQLite cannot take as they are: times
// to unix microseconds, slices (other than []byte) to JSON arrays.
func sqliteArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case time.Time:
			out[i] = v.UnixMicro()
		case *time.Time:
			if v == nil {
				out[i] = nil
			} else {
				out[i] = v.UnixMicro()
			}
		case []byte, driver.Valuer, nil:
			out[i] = a
		default:
			if reflect.TypeOf(a).Kind() == reflect.Slice {
				b, err := json.Marshal(a)
				if err != nil {
					out[i] = a // let the driver report it
					continue
				}
				out[i] = string(b)
				continue
			}
			out[i] = a
		}
	}
	return out
}

// sqliteDest wraps scan destinations for times stored as unix
// microseconds.
func sqliteDest(dest []any) []any {
	out := make([]any, len(dest))
	for i, d := range dest {
		switch v := d.(type) {
		case *time.Time:
			out[i] = microTime{v}
		case **time.Time:
			out[i] = nullMicroTime{v}
		default:
			out[i] = d
		}
	}
	return out
}

// microTime scans unix microseconds into a time.Time in UTC.
type microTime struct{ t *time.Time }

func (m microTime) Scan(src any) error {
	us, ok := src.(int64)
	if !ok {
		return fmt.Errorf("txdb: a time must be stored as unix microseconds (INTEGER), not %T", src)
	}
	*m.t = time.UnixMicro(us).UTC()
	return nil
}

// nullMicroTime is microTime for a nullable column: NULL is a nil pointer.
type nullMicroTime struct{ t **time.Time }

func (m nullMicroTime) Scan(src any) error {
	if src == nil {
		*m.t = nil
		return nil
	}
	var t time.Time
	if err := (microTime{&t}).Scan(src); err != nil {
		return err
	}
	*m.t = &t
	return nil
}

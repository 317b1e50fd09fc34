// Package process is what the pieces of the reference order system share
// to run as processes of their own (their Run functions): the piece's
// database, PostgreSQL or a SQLite file, with database/sql on it; its
// outbox, which on SQLite a relay in the process publishes; its inbox; and
// the consumer group of billing and the inventory, with a periodic log of
// what it handled.
package process

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/inbox"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/sink/kafka"
	"github.com/outbox-dev/outbox/store/pgstore"
	"github.com/outbox-dev/outbox/store/sqlitestore"
)

// Where says where a piece keeps its data: exactly one of the fields.
type Where struct {
	// DatabaseURL is a PostgreSQL URL or key=value DSN; Open connects to
	// it.
	DatabaseURL string
	// Pool is an open PostgreSQL pool, which the caller closes.
	Pool *pgxpool.Pool
	// SQLitePath is a SQLite file, created if missing.
	SQLitePath string
}

// Check reports a Where that does not name exactly one database; the
// error names the fields.
func (w Where) Check() error {
	n := 0
	for _, set := range []bool{w.DatabaseURL != "", w.Pool != nil, w.SQLitePath != ""} {
		if set {
			n++
		}
	}
	if n != 1 {
		return errors.New("exactly one of DatabaseURL, Pool and SQLitePath is required")
	}
	return nil
}

// Database is a piece's open database.
type Database struct {
	// DB is database/sql on it: pgx's stdlib driver over Pool on
	// PostgreSQL, sqlitestore.Open's on SQLite.
	DB *sql.DB
	// Pool is the PostgreSQL pool; nil on SQLite.
	Pool *pgxpool.Pool
	// SQLitePath is the SQLite file; empty on PostgreSQL.
	SQLitePath string
	// closers run at Close, last first.
	closers []func()
}

// Open opens the database w names. A pool it opens from w.DatabaseURL has
// at most maxConns connections and the application_name "outbox-example
// <purpose>" unless the URL sets one. Close the Database when done.
func Open(ctx context.Context, w Where, purpose string, maxConns int32) (*Database, error) {
	if err := w.Check(); err != nil {
		return nil, err
	}
	d := &Database{Pool: w.Pool, SQLitePath: w.SQLitePath}
	switch {
	case w.SQLitePath != "":
		db, err := sqlitestore.Open(ctx, w.SQLitePath)
		if err != nil {
			return nil, fmt.Errorf("open SQLite file %s: %w", w.SQLitePath, err)
		}
		d.DB = db
		d.onClose(func() { db.Close() })
		return d, nil
	case w.DatabaseURL != "":
		pool, err := openPool(ctx, w.DatabaseURL, purpose, maxConns)
		if err != nil {
			return nil, err
		}
		d.Pool = pool
		d.onClose(pool.Close)
	}
	db := stdlib.OpenDBFromPool(d.Pool)
	d.DB = db
	d.onClose(func() { db.Close() })
	return d, nil
}

// openPool connects to url.
func openPool(ctx context.Context, url, purpose string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", err) // pgx masks the password
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "outbox-example " + purpose
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to the database: %w", err)
	}
	return pool, nil
}

// SQLite reports whether the database is a SQLite file.
func (d *Database) SQLite() bool { return d.SQLitePath != "" }

// onClose adds fn to what Close runs.
func (d *Database) onClose(fn func()) { d.closers = append(d.closers, fn) }

// Close stops the relay Outbox started, if any, and closes what Open
// opened, in the reverse order.
func (d *Database) Close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
	d.closers = nil
}

// Outbox returns the piece's outbox, for enqueuing in its transactions.
// On PostgreSQL it is the store in schema, whose tables must exist ('outbox
// migrate' creates them); the relay is a process of its own. On SQLite it
// is the store in the file, migrated here, and a relay in this process
// publishes it with a producer of sink until Close.
func (d *Database) Outbox(ctx context.Context, schema string, sink kafka.Config, log *slog.Logger) (outbox.Enqueuer[*sql.Tx], error) {
	if !d.SQLite() {
		return pgOutbox(ctx, d.Pool, schema, log)
	}
	st, err := sqlitestore.New(d.DB, sqlitestore.Config{Logger: log})
	if err != nil {
		return nil, err
	}
	if err := st.Migrate(ctx); err != nil {
		return nil, err
	}
	snk, err := kafka.New(sink)
	if err != nil {
		return nil, err
	}
	r, err := relay.New(relay.Config{Store: st, Sink: snk, PollInterval: sqlitestore.PollInterval, Logger: log})
	if err == nil {
		err = r.Start(context.WithoutCancel(ctx)) // stopped by Close, after the piece stopped writing
	}
	if err != nil {
		snk.Close()
		return nil, fmt.Errorf("relay: %w", err)
	}
	d.onClose(func() {
		_ = r.Stop(context.Background()) // waits for the acks in flight
		snk.Close()
	})
	return st, nil
}

// pgOutbox is the store in schema, checked to have its table.
func pgOutbox(ctx context.Context, pool *pgxpool.Pool, schema string, log *slog.Logger) (outbox.Enqueuer[*sql.Tx], error) {
	st, err := pgstore.New(pool, pgstore.Config{Schema: schema, Logger: log})
	if err != nil {
		return nil, err
	}
	// Looking up the nil id is one index probe; it fails unless the table exists.
	if _, err := st.Get(ctx, uuid.Nil); !errors.Is(err, pgstore.ErrNotFound) {
		return nil, fmt.Errorf("the outbox table in schema %s is missing or unreadable; run 'outbox migrate --schema %s' first: %w",
			st.Schema(), st.Schema(), err)
	}
	return st.SQL(), nil
}

// Inbox returns the piece's inbox, migrated, with h bound to it for a
// consumer runner: on PostgreSQL in schema, through its database/sql face;
// on SQLite in the file.
func (d *Database) Inbox(ctx context.Context, schema string, log *slog.Logger, h inbox.SQLHandlerFunc) (*inbox.Bound, error) {
	if d.SQLite() {
		ib, err := inbox.NewSQLite(d.DB, inbox.SQLiteConfig{Logger: log})
		if err != nil {
			return nil, err
		}
		if err := ib.Migrate(ctx); err != nil {
			return nil, err
		}
		return ib.Bind(h), nil
	}
	ib, err := inbox.New(d.Pool, inbox.Config{Schema: schema, Logger: log})
	if err != nil {
		return nil, err
	}
	if err := ib.Migrate(ctx); err != nil {
		return nil, err
	}
	return ib.SQL().Bind(h), nil
}

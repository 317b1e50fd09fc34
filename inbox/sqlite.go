package inbox

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox/internal/conf"
	"github.com/outbox-dev/outbox/internal/migrate"
	"github.com/outbox-dev/outbox/internal/sqlname"
)

// SQLHandlerFunc applies a message's effect with tx, the database/sql
// transaction that also records the message as processed: of a
// [SQLiteInbox], or of a PostgreSQL inbox's [SQLInbox]. The rules of
// [HandlerFunc] hold: all database work with tx, no commit or rollback, an
// error rolls back both the effect and the record, wrap [ErrPermanent] when
// retrying cannot help. On SQLite, in addition, it must not write through
// the *sql.DB itself while it runs: tx holds the database's only write
// lock, so such a write waits for tx, which waits for the handler (with a
// *sql.DB from sqlitestore.Open it fails after sqlitestore.BusyTimeout).
type SQLHandlerFunc func(ctx context.Context, tx *sql.Tx, msg Message) error

// SQLiteConfig configures a [SQLiteInbox].
type SQLiteConfig struct {
	// TablePrefix starts the names of the inbox's tables and indexes:
	// <prefix>inbox_processed, <prefix>inbox_parked and
	// <prefix>inbox_migrations, which records the inbox's own migrations
	// (apart from the outbox store's). It must be empty or match
	// ^[a-z_][a-z0-9_]{0,39}$, and not start with "sqlite_". Defaults to ""
	// (tables inbox_processed, ...), which is right when one service owns
	// the database file; give each consumer sharing a file with others its
	// own prefix only if they must be kept apart (the consumer name already
	// keeps their records apart in one table).
	TablePrefix string
	// Retention is how long the id of a processed message is kept; see
	// Config.Retention for what it must outlive. Defaults to 30 days.
	Retention time.Duration
	// ReplayedRetention is how long a replayed parked message is kept;
	// see Config.ReplayedRetention. Defaults to 90 days.
	ReplayedRetention time.Duration
	// ParkedRetention is how long a parked message that was never replayed
	// is kept; see Config.ParkedRetention for why 0, the default, keeps it
	// until it is replayed. Otherwise at least 1s.
	ParkedRetention time.Duration
	// CleanupBatchSize is the most rows one Cleanup statement deletes, so
	// that the write lock is held briefly. Defaults to 1000.
	CleanupBatchSize int
	// Logger receives a warning per parked message and a note per Cleanup.
	// Defaults to slog.Default().
	Logger *slog.Logger
}

// withDefaults returns c with every zero field set to its default.
func (c SQLiteConfig) withDefaults() SQLiteConfig {
	retentionDefaults(&c.Retention, &c.ReplayedRetention, &c.CleanupBatchSize, &c.Logger)
	return c
}

// validate checks c after defaults and names the first bad field.
func (c SQLiteConfig) validate() error {
	return conf.First(ErrInvalidConfig, sqlname.Prefix("TablePrefix", c.TablePrefix, true),
		checkRetention(c.Retention, c.ReplayedRetention, c.ParkedRetention, c.CleanupBatchSize))
}

// SQLiteInbox is the inbox in a SQLite database: the same guarantees as
// [Inbox], for consumers whose business tables live in SQLite. It is safe
// for concurrent use.
type SQLiteInbox struct {
	db         *sql.DB
	cfg        SQLiteConfig
	log        *slog.Logger
	q          queries
	migrations []migrate.Migration
}

//go:embed sqlite/queries/*.sql sqlite/migrations/*.up.sql
var sqliteFiles embed.FS

// sqliteMigrations are the embedded SQLite migrations in version order,
// unrendered.
var sqliteMigrations = migrate.MustLoad("inbox", sqliteFiles, "sqlite/migrations")

// NewSQLite returns an inbox on db using the tables named by
// cfg.TablePrefix. db should come from sqlitestore.Open, and be the same
// *sql.DB the application and the outbox relay use: its write transactions
// take SQLite's write lock at BEGIN and queue for it in the process, which
// is what makes Handle's duplicate detection race-free and keeps "database
// is locked" away. NewSQLite does not touch the database; call
// [SQLiteInbox.Migrate] to create or update the tables. A bad cfg gives an
// error that wraps [ErrInvalidConfig] and names the field.
func NewSQLite(db *sql.DB, cfg SQLiteConfig) (*SQLiteInbox, error) {
	if db == nil {
		return nil, errors.New("inbox: NewSQLite: nil db")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	i := &SQLiteInbox{db: db, cfg: cfg, log: cfg.Logger}
	if err := i.q.load(sqliteFiles, "sqlite/queries", i.render); err != nil {
		return nil, err
	}
	i.migrations = migrate.Render(sqliteMigrations, i.render)
	return i, nil
}

// TablePrefix returns the prefix of the inbox's tables (after defaults).
func (i *SQLiteInbox) TablePrefix() string { return i.cfg.TablePrefix }

// Ping reports whether the database answers. The consumer runner uses it
// to tell a database outage from a failing handler.
func (i *SQLiteInbox) Ping(ctx context.Context) error { return i.db.PingContext(ctx) }

// sqliteNowMS is the database clock in unix milliseconds, as the outbox
// store keeps time. 'now' is fixed for the duration of one statement.
const sqliteNowMS = "CAST(ROUND(unixepoch('now', 'subsec') * 1000) AS INTEGER)"

// render fills the placeholders of an embedded SQL text: {{prefix}}, the
// validated table prefix, which the texts use only inside double-quoted
// identifiers, and {{now_ms}}, the expression sqliteNowMS.
func (i *SQLiteInbox) render(sql string) string {
	return strings.NewReplacer("{{prefix}}", i.cfg.TablePrefix, "{{now_ms}}", sqliteNowMS).Replace(sql)
}

// Migrate creates <prefix>inbox_migrations if it is absent and applies, in
// order, every embedded migration not yet recorded there. It runs in one
// write transaction (SQLite's DDL is transactional), so either all pending
// migrations are applied or none. It is idempotent, and safe when several
// processes run it at once: the write transaction takes the write lock at
// BEGIN, so they run one after the other and each one that waited finds
// the versions already recorded.
func (i *SQLiteInbox) Migrate(ctx context.Context) error {
	plan := migrate.Plan{Owner: "inbox", Table: migrate.Table{Name: i.cfg.TablePrefix + "inbox_migrations"},
		Migrations: i.migrations}
	applied, err := migrate.Run(ctx, migrate.SQLite(i.db), plan, nil)
	for _, m := range applied {
		i.log.Info("inbox: applied migration", slog.Int("version", m.Version), slog.String("name", m.Name),
			slog.String("table_prefix", i.cfg.TablePrefix))
	}
	return err
}

// Handle runs fn in a new write transaction together with recording
// (consumer, msg.ID), and commits both or neither, like [Inbox.Handle]:
//
//   - The record is inserted first. If consumer already processed msg.ID,
//     the insert fails with SQLITE_CONSTRAINT_PRIMARYKEY (recognised by its
//     code, never by the error text): fn is not run, the transaction is
//     rolled back, and Handle returns (Duplicate, nil).
//   - Two deliveries of the same message at the same moment cannot
//     overlap: the write transaction holds SQLite's write lock from BEGIN
//     (with a *sql.DB from sqlitestore.Open), so the second one starts
//     after the first committed, and is a Duplicate, or rolled back, and
//     goes ahead. Exactly one effect either way.
//   - If fn returns an error, or the commit fails, nothing of fn's work and
//     no record remain; Handle returns the error (wrapped; errors.Is finds
//     fn's error and [ErrPermanent]) and the message can be handled again.
//
// A constraint violation raised by fn's own statements is fn's error, not
// a duplicate. msg.ID must not be the nil UUID (the error wraps
// [ErrMalformed]).
func (i *SQLiteInbox) Handle(ctx context.Context, consumer string, msg Message, fn SQLHandlerFunc) (Result, error) {
	if err := checkHandle(consumer, msg.ID, fn == nil); err != nil {
		return 0, err
	}
	return handleTx(ctx, i.txOps(), consumer, msg, fn)
}

// sqliteConstraintPrimaryKey is SQLite's extended result code
// SQLITE_CONSTRAINT_PRIMARYKEY.
const sqliteConstraintPrimaryKey = 1555

// isPrimaryKeyViolation reports whether err is SQLite's primary key
// violation, by its extended result code. The driver's error
// (modernc.org/sqlite's *sqlite.Error) is matched by its Code method, so
// that this package does not link the SQLite driver into programs that use
// PostgreSQL only.
func isPrimaryKeyViolation(err error) bool {
	var coded interface{ Code() int }
	return errors.As(err, &coded) && coded.Code() == sqliteConstraintPrimaryKey
}

// txOps are the inbox's SQLite operations for the shared logic.
func (i *SQLiteInbox) txOps() txOps[*sql.Tx] {
	return sqlTxOps(i.log, i.db, i.q, isPrimaryKeyViolation, i.parkedGet)
}

// Park keeps msg as a message consumer gave up on, like [Inbox.Park]: with
// its payload, headers, position, attempts and cause's text; parking the
// same record again keeps the first entry and returns nil. It is one
// statement, a short write of its own.
func (i *SQLiteInbox) Park(ctx context.Context, consumer string, msg Message, attempts int, cause error) error {
	return park(ctx, i.log, consumer, msg, attempts, cause, func(ctx context.Context, e parkEntry) (bool, error) {
		var ts sql.NullInt64
		if !e.msg.Timestamp.IsZero() {
			ts = sql.NullInt64{Int64: e.msg.Timestamp.UnixMilli(), Valid: true}
		}
		res, err := i.db.ExecContext(ctx, i.q.park, e.id.String(), e.consumer, e.msg.ID.String(), e.msg.EventType,
			e.msg.AggregateID, e.msg.Topic, e.msg.Partition, e.msg.Offset, ts, string(e.headers), e.msg.Payload,
			e.error, e.attempts)
		if err != nil {
			return false, err
		}
		n, err := res.RowsAffected()
		return n > 0, err
	})
}

// Parked lists parked messages that match f, oldest first.
func (i *SQLiteInbox) Parked(ctx context.Context, f ParkedFilter) ([]Parked, error) {
	f, err := f.withDefaults()
	if err != nil {
		return nil, err
	}
	rows, err := i.db.QueryContext(ctx, i.q.parked, f.Consumer, f.EventType, f.IncludeReplayed, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("inbox: parked: %w", err)
	}
	out, err := collect(rows, scanSQLiteParked)
	if err != nil {
		return nil, fmt.Errorf("inbox: parked: %w", err)
	}
	return out, nil
}

// Replay handles the parked message id of consumer again through
// [SQLiteInbox.Handle], and in the same transaction marks the entry
// replayed; see [Inbox.Replay] for the results and errors.
func (i *SQLiteInbox) Replay(ctx context.Context, consumer string, id uuid.UUID, fn SQLHandlerFunc) (Result, error) {
	return replayTx(ctx, i.txOps(), consumer, id, fn, fn == nil)
}

// parkedGet reads one parked entry of consumer.
func (i *SQLiteInbox) parkedGet(ctx context.Context, consumer string, id uuid.UUID) (Parked, bool, error) {
	rows, err := i.db.QueryContext(ctx, i.q.parkedGet, id.String(), consumer)
	if err != nil {
		return Parked{}, false, err
	}
	ps, err := collect(rows, scanSQLiteParked)
	if err != nil || len(ps) == 0 {
		return Parked{}, false, err
	}
	return ps[0], true, nil
}

// Cleanup deletes processed ids and parked messages past their retentions
// (SQLiteConfig.Retention, ReplayedRetention and ParkedRetention), in
// batches of at most SQLiteConfig.CleanupBatchSize, each a short write of
// its own, until none is left; it returns how many rows it deleted in all.
// See [Inbox.Cleanup].
func (i *SQLiteInbox) Cleanup(ctx context.Context) (int64, error) {
	return cleanup(ctx, i.log, i.cfg.CleanupBatchSize, i.cleanupSteps(), i.cleanupBatch)
}

// cleanupSteps are the kinds of rows SQLiteInbox.Cleanup deletes.
func (i *SQLiteInbox) cleanupSteps() []cleanupStep {
	return newCleanupSteps(i.q, i.cfg.Retention, i.cfg.ReplayedRetention, i.cfg.ParkedRetention)
}

// cleanupBatch runs one batch statement of step and returns the rows it
// deleted.
func (i *SQLiteInbox) cleanupBatch(ctx context.Context, step cleanupStep) (int64, error) {
	res, err := i.db.ExecContext(ctx, step.query, step.age.Milliseconds(), i.cfg.CleanupBatchSize)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// collect reads every row with scan and closes rows.
func collect[T any](rows *sql.Rows, scan func(*sql.Rows) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// scanSQLiteParked reads one row of sqlite/queries/parked.sql or
// parked_get.sql.
func scanSQLiteParked(rows *sql.Rows) (Parked, error) {
	var (
		p                  Parked
		id, msgID, headers string
		ts, parked, replay sql.NullInt64
		partition          int32
	)
	err := rows.Scan(&id, &p.Consumer, &msgID, &p.Message.EventType, &p.Message.AggregateID, &p.Message.Topic,
		&partition, &p.Message.Offset, &ts, &headers, &p.Message.Payload, &p.Error, &p.Attempts, &parked, &replay)
	if err != nil {
		return Parked{}, err
	}
	p.Message.Partition = partition
	if p.ID, err = uuid.Parse(id); err != nil {
		return Parked{}, fmt.Errorf("parked entry id %q: %w", id, err)
	}
	if p.Message.ID, err = uuid.Parse(msgID); err != nil {
		return Parked{}, fmt.Errorf("parked entry %s: message id %q: %w", id, msgID, err)
	}
	var hs map[string]string
	if err := json.Unmarshal([]byte(headers), &hs); err != nil {
		return Parked{}, fmt.Errorf("parked entry %s: headers: %w", id, err)
	}
	p.ParkedAt = time.UnixMilli(parked.Int64)
	p.restore(milliTime(ts), milliTime(replay), hs)
	return p, nil
}

// milliTime is the time of a nullable unix-milliseconds column; nil for
// NULL.
func milliTime(ms sql.NullInt64) *time.Time {
	if !ms.Valid {
		return nil
	}
	t := time.UnixMilli(ms.Int64)
	return &t
}

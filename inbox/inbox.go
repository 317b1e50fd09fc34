package inbox

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox/internal/conf"
	"github.com/outbox-dev/outbox/internal/migrate"
	"github.com/outbox-dev/outbox/internal/migrate/pgmigrate"
	"github.com/outbox-dev/outbox/internal/sqlname"
	"github.com/outbox-dev/outbox/internal/sqltext"
)

// Defaults of [Config].
const (
	// DefaultSchema is the default of Config.Schema.
	DefaultSchema = "inbox"
	// DefaultRetention is the default of Config.Retention.
	DefaultRetention = 30 * 24 * time.Hour
	// DefaultCleanupBatchSize is the default of Config.CleanupBatchSize.
	DefaultCleanupBatchSize = 1000
	// DefaultReplayedRetention is the default of Config.ReplayedRetention.
	DefaultReplayedRetention = 90 * 24 * time.Hour
)

// Config configures an [Inbox].
type Config struct {
	// Schema is the PostgreSQL schema that holds the inbox tables. It must
	// match ^[a-z_][a-z0-9_]{0,62}$ and not start with "pg_". Defaults to
	// "inbox".
	Schema string
	// Retention is how long the id of a processed message is kept; Cleanup
	// deletes older ones. A message delivered again after its id was
	// deleted is applied again, so Retention must outlive every way a
	// message can come back: the topic's retention.ms (a consumer group
	// that lost its offsets, or is reset, reads the whole topic again) and
	// the longest a relay may hold a message before it re-sends it.
	// Defaults to 30 days.
	Retention time.Duration
	// ReplayedRetention is how long a parked message is kept after a Replay
	// applied it (or found it applied), as a record of what was parked and
	// why; Cleanup deletes older ones. Defaults to 90 days.
	ReplayedRetention time.Duration
	// ParkedRetention is how long a parked message that was never replayed
	// is kept; Cleanup deletes the ones parked longer ago, and with them
	// the only copy this consumer has of messages it never applied. 0, the
	// default, keeps them until they are replayed, however long that takes:
	// a parked message waits for a person to fix its cause, and deleting it
	// loses the event. Set it only where such a message may be given up,
	// and watch the parked messages ([Inbox.Parked]) well within it.
	// Otherwise at least 1s.
	ParkedRetention time.Duration
	// CleanupBatchSize is the most rows one Cleanup statement deletes, so
	// that no statement holds many locks or runs long. Defaults to 1000.
	CleanupBatchSize int
	// Logger receives a warning per parked message and a note per Cleanup.
	// Defaults to slog.Default().
	Logger *slog.Logger
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	conf.Default(&c.Schema, DefaultSchema)
	retentionDefaults(&c.Retention, &c.ReplayedRetention, &c.CleanupBatchSize, &c.Logger)
	return c
}

// validate checks c after defaults and names the first bad field.
func (c Config) validate() error {
	return conf.First(ErrInvalidConfig, sqlname.Schema("Schema", c.Schema),
		checkRetention(c.Retention, c.ReplayedRetention, c.ParkedRetention, c.CleanupBatchSize))
}

// retentionDefaults fills in the defaults of the fields every inbox's
// config has: Retention, ReplayedRetention, CleanupBatchSize and Logger.
func retentionDefaults(retention, replayed *time.Duration, batch *int, log **slog.Logger) {
	conf.Default(retention, DefaultRetention)
	conf.Default(replayed, DefaultReplayedRetention)
	conf.Default(batch, DefaultCleanupBatchSize)
	conf.Default(log, slog.Default())
}

// checkRetention checks the fields every inbox's config has, after
// defaults, and names the first bad one.
func checkRetention(retention, replayed, parked time.Duration, batch int) error {
	switch {
	case retention < time.Second:
		return conf.Bad("Retention", "%v must be at least 1s", retention)
	case replayed < time.Second:
		return conf.Bad("ReplayedRetention", "%v must be at least 1s", replayed)
	case parked != 0 && parked < time.Second:
		return conf.Bad("ParkedRetention", "%v must be 0 (keep until replayed) or at least 1s", parked)
	case batch < 1:
		return conf.Bad("CleanupBatchSize", "%d must be at least 1", batch)
	}
	return nil
}

// Inbox records which messages each consumer has processed, in the
// consumer's own database, and keeps the messages a consumer gave up on
// (parked). It is safe for concurrent use.
type Inbox struct {
	pool       *pgxpool.Pool
	cfg        Config
	log        *slog.Logger
	q          queries
	migrations []migrate.Migration

	sqlOnce sync.Once
	sql     *SQLInbox // made by SQL
}

// queries are the rendered SQL texts, with the schema (PostgreSQL) or the
// table prefix (SQLite) filled in.
type queries struct {
	markProcessed, park, parked, parkedGet, markReplayed string
	cleanup, cleanupReplayed, cleanupParked              string
}

//go:embed queries/*.sql
var queryFiles embed.FS

// New returns an inbox on pool using the tables in cfg.Schema. It does not
// touch the database; call [Inbox.Migrate] to create or update the tables.
// A bad cfg gives an error that wraps [ErrInvalidConfig] and names the
// field.
func New(pool *pgxpool.Pool, cfg Config) (*Inbox, error) {
	if pool == nil {
		return nil, errors.New("inbox: New: nil pool")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	i := &Inbox{pool: pool, cfg: cfg, log: cfg.Logger}
	if err := i.q.load(queryFiles, "queries", i.render); err != nil {
		return nil, err
	}
	i.migrations = migrate.Render(migrations, i.render)
	return i, nil
}

// load reads, from dir of fsys, the queries every inbox has, and stores
// them rendered.
func (q *queries) load(fsys embed.FS, dir string, render func(string) string) error {
	err := sqltext.Load(fsys, dir, render, map[*string]string{
		&q.markProcessed:   "mark_processed.sql",
		&q.park:            "park.sql",
		&q.parked:          "parked.sql",
		&q.parkedGet:       "parked_get.sql",
		&q.markReplayed:    "mark_replayed.sql",
		&q.cleanup:         "cleanup.sql",
		&q.cleanupReplayed: "cleanup_replayed.sql",
		&q.cleanupParked:   "cleanup_parked.sql",
	})
	if err != nil {
		return fmt.Errorf("inbox: %w", err)
	}
	return nil
}

// Schema returns the schema the inbox uses (after defaults).
func (i *Inbox) Schema() string { return i.cfg.Schema }

// Ping reports whether the database answers. The consumer runner uses it
// to tell a database outage, which is nobody's fault, from a failing
// handler.
func (i *Inbox) Ping(ctx context.Context) error { return i.pool.Ping(ctx) }

// render fills the {{schema}} placeholder of an embedded SQL text with the
// validated schema name, quoted as an identifier.
func (i *Inbox) render(sql string) string {
	return strings.ReplaceAll(sql, "{{schema}}", pgx.Identifier{i.cfg.Schema}.Sanitize())
}

//go:embed migrations/*.up.sql
var migrationFiles embed.FS

// migrations are the embedded PostgreSQL migrations in version order,
// unrendered.
var migrations = migrate.MustLoad("inbox", migrationFiles, "migrations")

// Migrate creates the schema if it is absent and applies, in order, every
// embedded migration not yet recorded in <schema>.inbox_migrations. It runs
// in one transaction, so either all pending migrations are applied or none.
//
// Migrate is idempotent, and safe when several processes run it at once: a
// transaction-scoped advisory lock, keyed by the schema, serialises them,
// and each one that waited finds the versions already recorded.
func (i *Inbox) Migrate(ctx context.Context) error {
	plan := migrate.Plan{Owner: "inbox", Table: migrate.Table{Schema: i.cfg.Schema, Name: "inbox_migrations"},
		LockKey: migrate.LockKey("outbox.inbox.migrate:" + i.cfg.Schema), Migrations: i.migrations}
	_, err := migrate.Run(ctx, pgmigrate.Begin(i.pool), plan, nil)
	return err
}

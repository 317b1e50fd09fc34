package inbox

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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

// schemaRe is the identifier rule for Config.Schema: lower-case, so that the
// quoted and unquoted spellings name the same schema, and at most 63 bytes,
// PostgreSQL's identifier limit.
var schemaRe = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

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
	if c.Schema == "" {
		c.Schema = DefaultSchema
	}
	c.Retention, c.ReplayedRetention, c.CleanupBatchSize, c.Logger = retentionDefaults(
		c.Retention, c.ReplayedRetention, c.CleanupBatchSize, c.Logger)
	return c
}

// validate checks c after defaults and names the first bad field.
func (c Config) validate() error {
	switch {
	case !schemaRe.MatchString(c.Schema):
		return fmt.Errorf("%w: Schema %q must match %s", ErrInvalidConfig, c.Schema, schemaRe)
	case strings.HasPrefix(c.Schema, "pg_"):
		return fmt.Errorf("%w: Schema %q must not start with pg_ (reserved by PostgreSQL)", ErrInvalidConfig, c.Schema)
	}
	return validateRetention(c.Retention, c.ReplayedRetention, c.ParkedRetention, c.CleanupBatchSize)
}

// retentionDefaults fills in the defaults of the fields every inbox's
// config has: Retention, ReplayedRetention, CleanupBatchSize and Logger.
func retentionDefaults(retention, replayed time.Duration, batch int, log *slog.Logger) (
	time.Duration, time.Duration, int, *slog.Logger) {
	if retention == 0 {
		retention = DefaultRetention
	}
	if replayed == 0 {
		replayed = DefaultReplayedRetention
	}
	if batch == 0 {
		batch = DefaultCleanupBatchSize
	}
	if log == nil {
		log = slog.Default()
	}
	return retention, replayed, batch, log
}

// validateRetention checks the fields every inbox's config has, after
// defaults, and names the first bad one.
func validateRetention(retention, replayed, parked time.Duration, batch int) error {
	switch {
	case retention < time.Second:
		return fmt.Errorf("%w: Retention %v must be at least 1s", ErrInvalidConfig, retention)
	case replayed < time.Second:
		return fmt.Errorf("%w: ReplayedRetention %v must be at least 1s", ErrInvalidConfig, replayed)
	case parked != 0 && parked < time.Second:
		return fmt.Errorf("%w: ParkedRetention %v must be 0 (keep until replayed) or at least 1s", ErrInvalidConfig, parked)
	case batch < 1:
		return fmt.Errorf("%w: CleanupBatchSize %d must be at least 1", ErrInvalidConfig, batch)
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
	migrations []migration
}

// queries are the rendered SQL texts, with the schema (PostgreSQL) or the
// table prefix (SQLite) filled in. migrateLock is PostgreSQL's only.
type queries struct {
	markProcessed, park, parked, parkedGet, markReplayed string
	cleanup, cleanupReplayed, cleanupParked              string

	migrateLock, migrateSetup, migrateApplied, migrateRecord string
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
	if err := i.q.load(queryFiles, "queries", i.render, queryFile{&i.q.migrateLock, "migrate_lock.sql"}); err != nil {
		return nil, err
	}
	i.migrations = renderMigrations(migrations, i.render)
	return i, nil
}

// queryFile names an embedded SQL text and where its rendered form goes.
type queryFile struct {
	dst  *string
	file string
}

// load reads, from dir of fsys, the queries every inbox has and those in
// extra, and stores them rendered.
func (q *queries) load(fsys embed.FS, dir string, render func(string) string, extra ...queryFile) error {
	files := append([]queryFile{
		{&q.markProcessed, "mark_processed.sql"},
		{&q.park, "park.sql"},
		{&q.parked, "parked.sql"},
		{&q.parkedGet, "parked_get.sql"},
		{&q.markReplayed, "mark_replayed.sql"},
		{&q.cleanup, "cleanup.sql"},
		{&q.cleanupReplayed, "cleanup_replayed.sql"},
		{&q.cleanupParked, "cleanup_parked.sql"},
		{&q.migrateSetup, "migrate_setup.sql"},
		{&q.migrateApplied, "migrate_applied.sql"},
		{&q.migrateRecord, "migrate_record.sql"},
	}, extra...)
	for _, f := range files {
		b, err := fsys.ReadFile(dir + "/" + f.file)
		if err != nil {
			return fmt.Errorf("inbox: read embedded %s/%s: %w", dir, f.file, err)
		}
		*f.dst = render(string(b))
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

// migration is one numbered schema change.
type migration struct {
	version int
	name    string
	sql     string
}

var migrationNameRe = regexp.MustCompile(`^(\d+)_([a-z0-9_]+)\.up\.sql$`)

// migrations are the embedded PostgreSQL migrations in version order,
// unrendered.
var migrations = mustLoadMigrations(migrationFiles, "migrations")

// mustLoadMigrations reads the migrations NNN_name.up.sql in dir of fsys, in
// version order.
func mustLoadMigrations(fsys embed.FS, dir string) []migration {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		panic(fmt.Sprintf("inbox: read embedded migrations: %v", err))
	}
	var out []migration
	seen := map[int]bool{}
	for _, e := range entries {
		m := migrationNameRe.FindStringSubmatch(e.Name())
		if m == nil {
			panic(fmt.Sprintf("inbox: embedded migration %s/%s is not named NNN_name.up.sql", dir, e.Name()))
		}
		v, _ := strconv.Atoi(m[1])
		if seen[v] {
			panic(fmt.Sprintf("inbox: two embedded migrations in %s have version %d", dir, v))
		}
		seen[v] = true
		b, err := fsys.ReadFile(dir + "/" + e.Name())
		if err != nil {
			panic(fmt.Sprintf("inbox: read embedded migration %s/%s: %v", dir, e.Name(), err))
		}
		out = append(out, migration{version: v, name: m[2], sql: string(b)})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].version < out[b].version })
	return out
}

// renderMigrations returns a copy of ms with their SQL rendered.
func renderMigrations(ms []migration, render func(string) string) []migration {
	out := append([]migration(nil), ms...)
	for n := range out {
		out[n].sql = render(out[n].sql)
	}
	return out
}

// applyMigrations runs, with exec, every migration of ms whose version is
// not in applied, and records it with the statement record ($1 version,
// $2 name). ms is in version order.
func applyMigrations(ctx context.Context, ms []migration, applied map[int]bool, record string,
	exec func(ctx context.Context, sql string, args ...any) error) ([]migration, error) {
	var done []migration
	for _, m := range ms {
		if applied[m.version] {
			continue
		}
		if err := exec(ctx, m.sql); err != nil {
			return nil, fmt.Errorf("inbox: migrate: apply %03d_%s: %w", m.version, m.name, err)
		}
		if err := exec(ctx, record, m.version, m.name); err != nil {
			return nil, fmt.Errorf("inbox: migrate: record %03d_%s: %w", m.version, m.name, err)
		}
		done = append(done, m)
	}
	return done, nil
}

// Migrate creates the schema if it is absent and applies, in order, every
// embedded migration not yet recorded in <schema>.inbox_migrations. It runs
// in one transaction, so either all pending migrations are applied or none.
//
// Migrate is idempotent, and safe when several processes run it at once: a
// transaction-scoped advisory lock, keyed by the schema, serialises them,
// and each one that waited finds the versions already recorded.
func (i *Inbox) Migrate(ctx context.Context) error {
	tx, err := i.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("inbox: migrate: begin: %w", err)
	}
	defer tx.Rollback(ctx) // a no-op after Commit

	if _, err := tx.Exec(ctx, i.q.migrateLock, i.migrateLockKey()); err != nil {
		return fmt.Errorf("inbox: migrate: take advisory lock: %w", err)
	}
	if _, err := tx.Exec(ctx, i.q.migrateSetup); err != nil {
		return fmt.Errorf("inbox: migrate: create schema %s and inbox_migrations: %w", i.cfg.Schema, err)
	}
	rows, err := tx.Query(ctx, i.q.migrateApplied)
	if err != nil {
		return fmt.Errorf("inbox: migrate: read applied versions: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return fmt.Errorf("inbox: migrate: read applied versions: %w", err)
	}
	applied := make(map[int]bool, len(versions))
	for _, v := range versions {
		applied[int(v)] = true
	}
	_, err = applyMigrations(ctx, i.migrations, applied, i.q.migrateRecord,
		func(ctx context.Context, sql string, args ...any) error {
			_, err := tx.Exec(ctx, sql, args...)
			return err
		})
	if err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("inbox: migrate: commit: %w", err)
	}
	return nil
}

// migrateLockKey is the advisory lock key that serialises Migrate for this
// inbox's schema.
func (i *Inbox) migrateLockKey() int64 {
	h := fnv.New64a()
	h.Write([]byte("outbox.inbox.migrate:" + i.cfg.Schema))
	return int64(h.Sum64())
}

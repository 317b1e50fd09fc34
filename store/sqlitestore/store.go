package sqlitestore

import (
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/conf"
	"github.com/outbox-dev/outbox/internal/migrate"
	"github.com/outbox-dev/outbox/internal/sqlname"
	"github.com/outbox-dev/outbox/internal/sqltext"
	"github.com/outbox-dev/outbox/store"
)

// DefaultTablePrefix is the default of Config.TablePrefix.
const DefaultTablePrefix = "outbox_"

// PollInterval is the relay.Config.PollInterval to use with this store.
// SQLite has no LISTEN/NOTIFY, so a relay learns of new messages only by
// polling; a claim that finds nothing holds the write lock for microseconds,
// so it can afford to look ten times a second.
const PollInterval = 100 * time.Millisecond

// ErrInvalidConfig is wrapped by the error [New] returns for a Config it
// cannot use; the message names the bad field.
var ErrInvalidConfig = errors.New("sqlitestore: invalid config")

// ErrNotFound is returned (wrapped) by [Store.Get] when no message has the
// id. Test for it with errors.Is.
var ErrNotFound = errors.New("sqlitestore: message not found")

// Config configures a [Store].
type Config struct {
	// TablePrefix starts the names of the store's tables and indexes:
	// <prefix>messages, <prefix>migrations. It must match
	// ^[a-z_][a-z0-9_]{0,39}$ and not start with "sqlite_". Defaults to
	// "outbox_".
	TablePrefix string
	// Limits bound what Enqueue accepts. Defaults to the zero
	// [outbox.Limits], which means outbox's defaults.
	Limits outbox.Limits
	// Logger receives what [Store.Migrate] applied and what [Store.Cleanup]
	// deleted. Defaults to slog.Default().
	Logger *slog.Logger
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	conf.Default(&c.TablePrefix, DefaultTablePrefix)
	c.Limits = c.Limits.WithDefaults()
	conf.Default(&c.Logger, slog.Default())
	return c
}

// validate checks c after defaults and names the first bad field.
func (c Config) validate() error {
	return conf.First(ErrInvalidConfig, sqlname.Prefix("TablePrefix", c.TablePrefix, false), c.Limits.Validate())
}

// Store is the SQLite outbox store. It is safe for concurrent use.
type Store struct {
	db  *sql.DB
	cfg Config
	q   queries
	// migrations are the embedded migrations with their SQL rendered.
	migrations []migrate.Migration
	// rotation is where the next claim's scan by aggregate starts.
	rotation rotation
}

// Compile-time proof that Store is a store backend.
var (
	_ store.Queue              = (*Store)(nil)
	_ outbox.Enqueuer[*sql.Tx] = (*Store)(nil)
)

// queries are the rendered SQL texts, with the table prefix filled in.
type queries struct {
	enqueue, markSent, markFailed, release, get, counts, cleanup string

	// The steps of a claim (claim.go, run.go).
	claimFirstDue, claimBySeq, claimBeyond, claimByAggregate, claimRun, claim string
}

//go:embed queries/*.sql
var queryFiles embed.FS

// New returns a store on db using the tables named by cfg.TablePrefix. db
// should come from [Open]; see there for why. New does not touch the
// database; call [Store.Migrate] to create or update the tables. A bad cfg
// gives an error that wraps [ErrInvalidConfig] and names the field.
func New(db *sql.DB, cfg Config) (*Store, error) {
	if db == nil {
		return nil, errors.New("sqlitestore: New: nil db")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Store{db: db, cfg: cfg}
	err := sqltext.Load(queryFiles, "queries", s.render, map[*string]string{
		&s.q.enqueue:          "enqueue.sql",
		&s.q.claimFirstDue:    "claim_first_due.sql",
		&s.q.claimBySeq:       "claim_by_seq.sql",
		&s.q.claimBeyond:      "claim_beyond.sql",
		&s.q.claimByAggregate: "claim_by_aggregate.sql",
		&s.q.claimRun:         "claim_run.sql",
		&s.q.claim:            "claim.sql",
		&s.q.markSent:         "mark_sent.sql",
		&s.q.markFailed:       "mark_failed.sql",
		&s.q.release:          "release.sql",
		&s.q.get:              "get.sql",
		&s.q.counts:           "counts.sql",
		&s.q.cleanup:          "cleanup.sql",
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: %w", err)
	}
	s.migrations = migrate.Render(migrations, s.render)
	return s, nil
}

// TablePrefix returns the prefix of the store's tables (after defaults).
func (s *Store) TablePrefix() string { return s.cfg.TablePrefix }

// nowMS is the database clock in unix milliseconds. 'now' is fixed for the
// duration of one statement, so every use in a statement sees one instant.
const nowMS = "CAST(ROUND(unixepoch('now', 'subsec') * 1000) AS INTEGER)"

// render fills the placeholders of an embedded SQL text: {{prefix}}, the
// validated table prefix, which the texts use only inside double-quoted
// identifiers ("{{prefix}}messages"), and {{now_ms}}, the constant
// expression nowMS.
func (s *Store) render(sql string) string {
	return strings.NewReplacer(
		"{{prefix}}", s.cfg.TablePrefix,
		"{{now_ms}}", nowMS,
	).Replace(sql)
}

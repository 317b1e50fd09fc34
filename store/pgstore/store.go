package pgstore

import (
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/conf"
	"github.com/outbox-dev/outbox/internal/migrate"
	"github.com/outbox-dev/outbox/internal/sqlname"
	"github.com/outbox-dev/outbox/internal/sqltext"
	"github.com/outbox-dev/outbox/store"
)

// DefaultSchema is the default of Config.Schema.
const DefaultSchema = "outbox"

// ErrInvalidConfig is wrapped by the error [New] returns for a Config it
// cannot use; the message names the bad field.
var ErrInvalidConfig = errors.New("pgstore: invalid config")

// ErrNotFound is returned (wrapped) by [Store.Get] when no message has the
// id. Test for it with errors.Is.
var ErrNotFound = errors.New("pgstore: message not found")

// Config configures a [Store].
type Config struct {
	// Schema is the PostgreSQL schema that holds the outbox tables. It must
	// match ^[a-z_][a-z0-9_]{0,62}$ and not start with "pg_". Defaults to
	// "outbox".
	Schema string
	// Limits bound what Enqueue accepts. Defaults to the zero
	// [outbox.Limits], which means outbox's defaults.
	Limits outbox.Limits
	// Logger receives warnings from the background work of
	// [Store.Notifications] (lost and restored listening connections).
	// Defaults to slog.Default().
	Logger *slog.Logger
	// FullClaimInterval is how often the store looks for due messages
	// below the claim floor. Claims start their scan at the floor, the
	// lowest due message an earlier claim saw, so that they do not walk
	// the index entries that marking left behind (dead until VACUUM
	// removes them). Every FullClaimInterval one query on a connection of
	// its own scans from the lowest seq and lowers the floor to what it
	// finds: retries that became due, expired leases, a replayed dead
	// letter, and messages whose transaction took longer than
	// FullClaimInterval to commit. Those wait up to about FullClaimInterval
	// longer than others; order is unaffected. Defaults to
	// [DefaultFullClaimInterval]; a negative value makes every claim scan
	// from the lowest seq (no floor).
	FullClaimInterval time.Duration
	// SynchronousRelayCommits makes the relay's claims and marks wait for
	// their WAL flush like any commit. Defaults to false: they commit with
	// synchronous_commit = off, so that they do not add WAL flushes for the
	// application's commits to wait behind. A claim or mark lost in a
	// database crash only means that its messages are published again,
	// which at-least-once delivery allows (queries/relay_settings.sql).
	SynchronousRelayCommits bool
	// Partitioning, when its Interval is set, makes [Store.Migrate] create
	// outbox_messages as a table partitioned by created_at (or convert the
	// plain one), so that retention drops whole partitions instead of
	// deleting rows (package ops, "outbox cleanup --partitions"). Defaults
	// to the zero Partitioning: a plain table.
	Partitioning Partitioning
	// CursorSaveInterval is how often, in cursor mode (package
	// relay/cursor), the leading relay saves its position, and what it
	// handled above it, while messages are acknowledged. A leader that stops without resigning (a
	// crash) leaves its last save, and the next leader publishes again what
	// was in flight and what was acknowledged after that save: about this
	// interval's worth of messages. Saving is one small UPDATE
	// in the round trip of a read. Defaults to
	// [DefaultCursorSaveInterval]; a negative value saves in every
	// MarkSent, a round trip each (exact Get, more database work).
	CursorSaveInterval time.Duration
	// CursorReadAhead bounds, in cursor mode, the messages the leading
	// relay holds in memory: read and not yet acknowledged, including those
	// waiting for an earlier message of their aggregate. Defaults to
	// [DefaultCursorReadAhead].
	CursorReadAhead int
	// LeaderLease is, in cursor mode, the lease of the relay that leads
	// the cursor: the longest a standby waits for a leader that stopped
	// renewing it (a hung or partitioned process) before it takes over.
	// A relay that leads renews its lease every third of it, on the pool,
	// until it resigns (relay/cursor's Strategy.Close), loses the lead or
	// the pool is closed, whatever its caller does meanwhile (reads, idles or waits
	// for the broker). A standby tries to lead with its claims, as often as
	// FullClaimInterval allows and at least five times per LeaderLease
	// (with relay.Config's default PollInterval, once a second). The old
	// leader's writes are fenced by its lease token from the takeover on.
	// Defaults to [DefaultLeaderLease]; at least 1s.
	LeaderLease time.Duration
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	conf.Default(&c.Schema, DefaultSchema)
	c.Limits = c.Limits.WithDefaults()
	conf.Default(&c.Logger, slog.Default())
	return c
}

// validate checks c after defaults and names the first bad field.
func (c Config) validate() error {
	if err := sqlname.Schema("Schema", c.Schema); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if err := c.Partitioning.validate(); err != nil {
		return err
	}
	return conf.First(ErrInvalidConfig,
		conf.Rule("LeaderLease", c.LeaderLease == 0 || c.LeaderLease >= minLeaderLease,
			"must be at least %v, not %v", minLeaderLease, c.LeaderLease),
		conf.NotNegative("CursorReadAhead", c.CursorReadAhead),
		c.Limits.Validate(),
	)
}

// Store is the PostgreSQL outbox store. It is safe for concurrent use.
type Store struct {
	pool    *pgxpool.Pool
	cfg     Config
	channel string // the NOTIFY channel, "outbox_" + schema
	q       queries
	floor   claimFloor // where claims start their scan (claimfloor.go)
	// sweepPiece is the sweep's first span of seqs (claimfloor.go); 0 means
	// sweepPiece, tests set less. onProbePiece, if set, sees every
	// statement of a probe below the floor before it is sent (tests).
	sweepPiece   int64
	onProbePiece func(from, to int64)
	// rotation is where claims start their scan by aggregate (queue.go).
	rotation claimRotation
	// modes is what the store knows of the outbox's mode (claimmode.go).
	modes claimModes
	// migrations are the embedded migrations with their SQL rendered.
	migrations []migrate.Migration
}

// Compile-time proof that Store is a full store backend.
var (
	_ store.Queue       = (*Store)(nil)
	_ store.Notifier    = (*Store)(nil)
	_ store.MarkClaimer = (*Store)(nil)
)

// queries are the rendered SQL texts, with the schema filled in.
type queries struct {
	enqueue, markSent, markFailed, release, get, counts string
	idle, busy                                          string
	// The claims (queue.go): of heads only, and of runs.
	claim, claimRun string
	// The relay's batches (queue.go).
	relaySettings, claimFloor, seedFloor, failpointWatch, failpointPause string
	// Cursor mode (cursortrip.go, cursorops.go, cursormode.go).
	cursorRead, cursorMode, cursorState, cursorSave, cursorResign, cursorTable string
	cursorRenew                                                                string
	cursorMigrated, cursorCheck, cursorEnable, cursorDisable, cursorUnqueue    string
	cursorDeactivate                                                           string

	migrateLock string

	checkMigrated string
}

//go:embed queries/*.sql
var queryFiles embed.FS

// New returns a store on pool using the tables in cfg.Schema. It does not
// touch the database; call [Store.Migrate] to create or update the tables.
// A bad cfg gives an error that wraps [ErrInvalidConfig] and names the field.
func New(pool *pgxpool.Pool, cfg Config) (*Store, error) {
	if pool == nil {
		return nil, errors.New("pgstore: New: nil pool")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Store{pool: pool, cfg: cfg, channel: channelName(cfg.Schema)}
	// Fragments: what cursor_read.sql has in place of {{cursor_columns}},
	// that and claim_floor.sql in place of {{earlier_unsent}}, and the two
	// claims in place of {{claim_heads}}.
	var cols, earlier, heads string
	err := sqltext.Load(queryFiles, "queries", s.render, map[*string]string{
		&s.q.enqueue:          "enqueue.sql",
		&s.q.claim:            "claim.sql",
		&s.q.claimRun:         "claim_run.sql",
		&s.q.markSent:         "mark_sent.sql",
		&s.q.markFailed:       "mark_failed.sql",
		&s.q.release:          "release.sql",
		&s.q.get:              "get.sql",
		&s.q.counts:           "counts.sql",
		&s.q.idle:             "idle.sql",
		&s.q.busy:             "busy.sql",
		&s.q.relaySettings:    "relay_settings.sql",
		&s.q.claimFloor:       "claim_floor.sql",
		&s.q.seedFloor:        "seed_floor.sql",
		&s.q.failpointWatch:   "failpoint_watch.sql",
		&s.q.failpointPause:   "failpoint_pause.sql",
		&s.q.cursorRead:       "cursor_read.sql",
		&s.q.cursorMode:       "cursor_mode.sql",
		&s.q.cursorState:      "cursor_state.sql",
		&s.q.cursorSave:       "cursor_save.sql",
		&s.q.cursorResign:     "cursor_resign.sql",
		&s.q.cursorTable:      "cursor_table.sql",
		&s.q.cursorRenew:      "cursor_renew.sql",
		&s.q.cursorMigrated:   "cursor_migrated.sql",
		&s.q.cursorCheck:      "cursor_check.sql",
		&s.q.cursorEnable:     "cursor_enable.sql",
		&s.q.cursorDisable:    "cursor_disable.sql",
		&s.q.cursorDeactivate: "cursor_deactivate.sql",
		&s.q.cursorUnqueue:    "cursor_unqueue.sql",
		&s.q.migrateLock:      "migrate_lock.sql",
		&s.q.checkMigrated:    "check_migrated.sql",
		&cols:                 "cursor_columns.sql",
		&earlier:              "earlier_unsent.sql",
		&heads:                "claim_heads.sql",
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	cols = strings.ReplaceAll(cols, "{{earlier_unsent}}", earlier)
	s.q.claimFloor = strings.ReplaceAll(s.q.claimFloor, "{{earlier_unsent}}", earlier)
	s.q.cursorRead = strings.ReplaceAll(s.q.cursorRead, "{{cursor_columns}}", cols)
	heads = strings.TrimSuffix(heads, "\n")
	s.q.claim = strings.ReplaceAll(s.q.claim, "{{claim_heads}}", heads)
	s.q.claimRun = strings.ReplaceAll(s.q.claimRun, "{{claim_heads}}", heads)
	s.migrations = migrate.Render(migrations, s.render)
	return s, nil
}

// Schema returns the schema the store uses (after defaults).
func (s *Store) Schema() string { return s.cfg.Schema }

// render fills the placeholders of an embedded SQL text. The only values
// substituted are the validated schema name, quoted as an identifier, and the
// channel derived from it, quoted as a literal.
func (s *Store) render(sql string) string {
	return strings.NewReplacer(
		"{{schema}}", pgx.Identifier{s.cfg.Schema}.Sanitize(),
		"{{channel_literal}}", quoteLiteral(s.channel),
	).Replace(sql)
}

// channelName is the NOTIFY channel for schema: "outbox_" + schema, cut to
// PostgreSQL's identifier limit with a hash that keeps it distinct
// (sqlname.Fit).
func channelName(schema string) string { return sqlname.Fit("outbox_" + schema) }

// quoteLiteral quotes s as a SQL string literal.
func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

package ops

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/conf"
	"github.com/outbox-dev/outbox/internal/sqltext"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// StatusDiscarded is outbox.StatusDiscarded, kept here for callers of ops.
const StatusDiscarded = outbox.StatusDiscarded

// Statuses are all the states a stored message can be in, in the order the
// statistics list them.
var Statuses = []outbox.Status{
	outbox.StatusPending, outbox.StatusInFlight, outbox.StatusSent,
	outbox.StatusFailed, outbox.StatusDeadLetter, StatusDiscarded,
}

// Errors that callers branch on; test for them with errors.Is.
var (
	// ErrInvalidConfig is wrapped by the error of [New], [Ops.Republish]
	// and [Ops.Cleanup] for a config they cannot use, and of the dead-letter
	// methods for a Request or Filter they cannot use (a Filter.Group that
	// is not a group's key); the message names the field.
	ErrInvalidConfig = errors.New("ops: invalid config")
	// ErrNotFound is wrapped when a message id is not in the outbox.
	ErrNotFound = errors.New("ops: message not found")
	// ErrNotDeadLetter is wrapped when [Ops.Replay] or [Ops.Discard] is
	// given the id of a message that is not DEAD_LETTER (any more). Nothing
	// is changed then.
	ErrNotDeadLetter = errors.New("ops: message is not a dead letter")
	// ErrEmptySelection is returned by [Ops.Replay] and [Ops.Discard] when
	// they are given no ids, and by Replay for a filter that selects
	// nothing in particular (use Filter.All to mean every dead letter).
	ErrEmptySelection = errors.New("ops: no messages selected")
	// ErrReasonRequired is returned by [Ops.Discard] without a reason.
	ErrReasonRequired = errors.New("ops: a reason is required")
	// ErrCursorMismatch is wrapped by [Ops.Republish] when a cursor of the
	// same name exists with other parameters; choose another name, or set
	// RepublishConfig.Restart.
	ErrCursorMismatch = errors.New("ops: republish cursor exists with other parameters")
)

// Config configures [Ops].
type Config struct {
	// Schema is the PostgreSQL schema that holds the outbox tables, as
	// for pgstore.Config.Schema. Defaults to "outbox".
	Schema string
	// Top is how many blocked aggregates and failing event types
	// [Ops.Stats] lists. Defaults to 10.
	Top int
	// ExactSentCount makes [Ops.Stats] count the SENT messages, which
	// costs in proportion to the SENT history, instead of reading
	// PostgreSQL's estimate, however large the table. Defaults to false.
	ExactSentCount bool
	// ExactCountBelow makes [Ops.Stats] count the SENT messages exactly,
	// rather than read PostgreSQL's estimate, while the table holds fewer
	// rows than this as far as PostgreSQL's statistics know: counting a
	// small table costs little, and a new outbox's estimate (0 until
	// autovacuum first counts it) would be wrong. Defaults to
	// [DefaultExactCountBelow]; a negative value always estimates (unless
	// ExactSentCount).
	ExactCountBelow int64
	// Logger receives a line per operation that changes messages.
	// Defaults to slog.Default().
	Logger *slog.Logger
}

// Defaults of Config.
const (
	// DefaultTop is the default of Config.Top.
	DefaultTop = 10
	// DefaultExactCountBelow is the default of Config.ExactCountBelow.
	DefaultExactCountBelow = 100_000
)

func (c Config) withDefaults() Config {
	conf.Default(&c.Schema, pgstore.DefaultSchema)
	conf.Default(&c.Top, DefaultTop)
	conf.Default(&c.ExactCountBelow, DefaultExactCountBelow)
	conf.Default(&c.Logger, slog.Default())
	return c
}

// Ops runs the operators' tools on one outbox. It is safe for concurrent
// use.
type Ops struct {
	pool  *pgxpool.Pool
	store *pgstore.Store
	cfg   Config
	log   *slog.Logger
	q     queries

	// cursorSamples are where recent Stats saw the cursor, for its
	// throughput (Stats.CursorSentLastMinute).
	cursorSamples cursorSamples
}

type queries struct {
	statsCounts, statsSentEstimate, statsSentExact, statsHead, statsBlocked, statsFailing string

	statsCursor, statsCursorLag, statsCursorSentEstimate, statsCursorSentExact, statsCursorPassed string

	dlqList, dlqAttempts, dlqExtra, auditForMessage, auditInsert, replay, discard, selectByIDs string

	dlqGroups, dlqSeq, dlqMaxSeq, dlqBatchBounds string

	cleanupSent, cleanupDiscarded, cleanupQueued, cleanupCutoff string

	cursorGet, cursorCreate, cursorDelete, cursorAdvance, republishBatch string

	partitionCheck, partitionAttempts string

	topicsReport, statsTopics string
}

//go:embed queries/*.sql
var queryFiles embed.FS

// stateRecordColumns are pgstore.RecordColumns as the function
// outbox_message_states (pgstore's migration 016) returns them: the
// message's state in place of its stored status, so that pgstore.ScanRecord
// reads a record with the state every tool reports.
var stateRecordColumns = strings.Replace(pgstore.RecordColumns, ", status,", ", state,", 1)

// New returns the tools for the outbox in cfg.Schema on pool. It does not
// touch the database; the tables must have been migrated (pgstore's
// Migrate, or "outbox migrate"): until then the methods' errors wrap
// pgstore.ErrNotMigrated and say so. A bad cfg gives an error wrapping
// [ErrInvalidConfig] that names the field.
func New(pool *pgxpool.Pool, cfg Config) (*Ops, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: nil pool", ErrInvalidConfig)
	}
	cfg = cfg.withDefaults()
	if err := conf.First(ErrInvalidConfig, conf.AtLeast("Top", cfg.Top, 1)); err != nil {
		return nil, err
	}
	st, err := pgstore.New(pool, pgstore.Config{Schema: cfg.Schema, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	o := &Ops{pool: pool, store: st, cfg: cfg, log: cfg.Logger}
	var deadLetters string // what the dead-letter queries have in place of {{dead_letters}}
	if err := sqltext.Load(queryFiles, "queries", nil, map[*string]string{&deadLetters: "dead_letters.sql"}); err != nil {
		return nil, fmt.Errorf("ops: %w", err)
	}
	render := func(sql string) string {
		sql = strings.ReplaceAll(sql, "{{dead_letters}}", deadLetters)
		return strings.NewReplacer(
			"{{schema}}", pgx.Identifier{st.Schema()}.Sanitize(),
			"{{record_columns}}", stateRecordColumns,
			// Rendered inside string literals; it holds no quote
			// (TestDeadLetterClass_RenderedTextsNeedNoQuoting).
			"{{permanent}}", sink.ErrPermanent.Error(),
		).Replace(sql)
	}
	var cleanupFinal string
	err = sqltext.Load(queryFiles, "queries", render, map[*string]string{
		&o.q.statsCounts:             "stats_counts.sql",
		&o.q.statsSentEstimate:       "stats_sent_estimate.sql",
		&o.q.statsSentExact:          "stats_sent_exact.sql",
		&o.q.statsHead:               "stats_head.sql",
		&o.q.statsBlocked:            "stats_blocked.sql",
		&o.q.statsFailing:            "stats_failing.sql",
		&o.q.statsCursor:             "stats_cursor.sql",
		&o.q.statsCursorLag:          "stats_cursor_lag.sql",
		&o.q.statsCursorSentEstimate: "stats_cursor_sent_estimate.sql",
		&o.q.statsCursorSentExact:    "stats_cursor_sent_exact.sql",
		&o.q.statsCursorPassed:       "stats_cursor_passed.sql",
		&o.q.dlqList:                 "dlq_list.sql",
		&o.q.dlqAttempts:             "dlq_attempts.sql",
		&o.q.dlqExtra:                "dlq_extra.sql",
		&o.q.auditForMessage:         "audit_for_message.sql",
		&o.q.auditInsert:             "audit_insert.sql",
		&o.q.replay:                  "replay.sql",
		&o.q.discard:                 "discard.sql",
		&o.q.selectByIDs:             "select_by_ids.sql",
		&o.q.dlqGroups:               "dlq_groups.sql",
		&o.q.dlqSeq:                  "dlq_seq.sql",
		&o.q.dlqMaxSeq:               "dlq_max_seq.sql",
		&o.q.dlqBatchBounds:          "dlq_batch_bounds.sql",
		&cleanupFinal:                "cleanup_final.sql",
		&o.q.cleanupQueued:           "cleanup_queued.sql",
		&o.q.cleanupCutoff:           "cleanup_cutoff.sql",
		&o.q.cursorGet:               "republish_cursor_get.sql",
		&o.q.cursorCreate:            "republish_cursor_create.sql",
		&o.q.cursorDelete:            "republish_cursor_delete.sql",
		&o.q.cursorAdvance:           "republish_cursor_advance.sql",
		&o.q.republishBatch:          "republish_batch.sql",
		&o.q.partitionCheck:          "partition_check.sql",
		&o.q.partitionAttempts:       "partition_attempts.sql",
		&o.q.topicsReport:            "topics_report.sql",
		&o.q.statsTopics:             "stats_topics.sql",
	})
	if err != nil {
		return nil, fmt.Errorf("ops: %w", err)
	}
	o.q.cleanupSent = cleanupFinalFor(cleanupFinal, outbox.StatusSent, ", false", "published_at")
	o.q.cleanupDiscarded = cleanupFinalFor(cleanupFinal, outbox.StatusDiscarded, "", "discarded_at")
	return o, nil
}

// Schema returns the schema the tools work on (after defaults).
func (o *Ops) Schema() string { return o.store.Schema() }

// CheckMigrated reports whether the outbox tables are in the schema, with
// one cheap query: nil, an error wrapping pgstore.ErrNotMigrated that names
// the schema and the fix, or the database's error. It is the relay's
// readiness check ("outbox" in /readyz).
func (o *Ops) CheckMigrated(ctx context.Context) error { return o.store.CheckMigrated(ctx) }

// dbErr is err, or, when it says that the outbox tables are missing, an
// error wrapping pgstore.ErrNotMigrated that says how to fix it.
func (o *Ops) dbErr(err error) error { return pgstore.NotMigrated(o.Schema(), err) }

// DefaultActor names the person or program running an operation for the
// audit log: $USER (or the OS account) @ the host name, such as
// "alice@ops-box".
func DefaultActor() string {
	name := os.Getenv("USER")
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
	}
	if name == "" {
		name = "unknown"
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return name + "@" + host
}

// actorOr returns actor, or DefaultActor() when it is blank.
func actorOr(actor string) string {
	if strings.TrimSpace(actor) == "" {
		return DefaultActor()
	}
	return actor
}

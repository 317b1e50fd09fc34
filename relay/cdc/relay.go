package cdc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/condlog"
	"github.com/outbox-dev/outbox/internal/lifecycle"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/relay/failure"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// Relay publishes the outbox from the WAL. Create it with [New].
type Relay struct {
	cfg   Config
	log   *slog.Logger
	q     queries
	store *pgstore.Store
	table *relay.Relay // the table path
	// core publishes the stream's messages (its workers drive strat, the
	// stream's strategy, over the current session's ledger). It runs for
	// the relay's whole life.
	core  *relay.Relay
	strat *streamStrategy
	// policy decides what happens to a message that could not be decoded
	// (the core decides for the failures of its publishes).
	policy failure.Policy
	// outboxTable is the quoted, schema-qualified outbox table.
	outboxTable string

	recreate    atomic.Bool                // Config.RecreateSlot, until first used
	tablesReady atomic.Bool                // the relay's tables exist
	warnedKeep  atomic.Bool                // the max_slot_wal_keep_size warning was logged
	notMigrated condlog.Condition          // the outbox tables are missing
	leader      atomic.Bool                // this relay streams from the slot now
	lead        atomic.Pointer[leadership] // the session's lease of the slot (lead.go); nil on a standby
	// leaseRow orders this relay's statements on its lease row: the check
	// and the record lock the row FOR SHARE and hold leaseRow for reading,
	// the renewal updates the row and holds leaseRow for writing. So a
	// renewal waits only for the statements under way. Without it,
	// statements that overlap one another keep the row share-locked, and
	// PostgreSQL lets each new share lock in ahead of the waiting update:
	// under a steady load the renewal could wait until the lease lapsed.
	leaseRow   sync.RWMutex
	behindNano atomic.Int64 // unix nanos since when received messages wait; 0 when caught up
	// batchesInFlight counts the batches with messages that were checked
	// and added to the session's ledger and not yet passed by its confirmed
	// position (for tests: pipelining happened).
	batchesInFlight atomic.Int64

	run      lifecycle.Run     // Start runs once
	mu       sync.Mutex        // guards conn
	conn     net.Conn          // the replication connection's socket, for abort
	stopping *lifecycle.Signal // closed when Stop is called
	runCtx   context.Context
	runStop  context.CancelFunc // cancels waits and setup on stop
	sendCtx  context.Context
	sendStop context.CancelFunc // cancels publishes and marks after ShutdownTimeout
	aborted  atomic.Bool        // tests: stop like a crash
	done     chan struct{}      // closed when everything has returned
	err      error              // the fatal error, set before done is closed
	cause    error              // why the relay stopped itself (stopWith); set before stopping is closed
}

// New validates cfg (after defaults) and returns a relay that is not yet
// running. The error wraps [ErrInvalidConfig] and names the field.
func New(cfg Config) (*Relay, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	st, err := pgstore.New(cfg.Pool, pgstore.Config{Schema: cfg.Schema, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("%w: Schema: %w", ErrInvalidConfig, err)
	}
	q, err := loadQueries(cfg.Schema, cfg.Publication)
	if err != nil {
		return nil, err
	}
	r := &Relay{
		cfg:         cfg,
		log:         cfg.Logger.With(slog.String("relay", cfg.ID), slog.String("slot", cfg.Slot)),
		q:           q,
		store:       st,
		outboxTable: pgx.Identifier{cfg.Schema, "outbox_messages"}.Sanitize(),
		done:        make(chan struct{}),
	}
	r.stopping = lifecycle.NewSignal(func() {
		if r.runStop != nil {
			r.runStop() // set by Start
		}
	})
	r.recreate.Store(cfg.RecreateSlot)
	r.policy = failure.Policy{MaxAttempts: cfg.MaxAttempts, RetryBase: cfg.RetryBase, RetryMax: cfg.RetryMax}
	if err := r.newCore(); err != nil {
		return nil, err
	}
	r.table, err = relay.New(relay.Config{
		Store:                 &tableQueue{r: r},
		Sink:                  cfg.Sink,
		ID:                    cfg.ID + "-table",
		BatchSize:             min(cfg.BatchSize, relay.DefaultBatchSize),
		Workers:               1,
		Lease:                 cfg.Lease,
		PublishTimeout:        min(cfg.PublishTimeout, cfg.Lease/2),
		PollInterval:          cfg.TablePathInterval,
		DisableListen:         true,
		MaxAttempts:           cfg.MaxAttempts,
		RetryBase:             cfg.RetryBase,
		RetryMax:              cfg.RetryMax,
		UnavailableBackoffMax: cfg.UnavailableBackoffMax,
		ShutdownTimeout:       cfg.ShutdownTimeout,
		Logger:                r.log.With(slog.String("path", "table")),
		Hooks:                 relay.Hooks{Published: cfg.Hooks.Published, Failed: cfg.Hooks.Failed},
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return r, nil
}

// streamPollInterval is how often an idle worker of the stream's core
// claims without a wake-up: a backstop, since every change of the ledger
// that makes messages ready wakes the workers, and such a claim reads
// nothing but the ledger in memory.
const streamPollInterval = 5 * time.Second

// streamLease is the lease of the stream core's claims: Lease, or twice
// PublishTimeout if that is longer. Nobody else can take a message of the
// ledger, so it only bounds the core's retries of a claim's marks, and a
// session's end warns when a claim has not come back within it. A publish
// takes up to PublishTimeout, and a failure's record (which MarkFailed
// waits for) up to PublishTimeout once it starts, but it may first wait
// for the statements running before it (at most two) to return.
func streamLease(cfg Config) time.Duration { return max(cfg.Lease, 2*cfg.PublishTimeout) }

// newCore builds the stream's strategy and the relay core that drives it:
// ceil(MaxInFlight / BatchSize) workers, each claiming up to BatchSize
// ready messages; no lingering, and no polling to speak of (wake-ups do
// the work).
func (r *Relay) newCore() error {
	cfg := r.cfg
	log := r.log.With(slog.String("path", "stream"))
	r.strat = newStreamStrategy(log)
	failed := cfg.Hooks.Failed
	if failed != nil {
		// A publish that found the broker unreachable is given back, not
		// failed: nothing counts for it.
		failed = func(rec outbox.Record, err error, dead bool) {
			if sink.Classify(err) != sink.Unavailable {
				cfg.Hooks.Failed(rec, err, dead)
			}
		}
	}
	var err error
	r.core, err = relay.New(relay.Config{
		Strategy:              r.strat,
		Sink:                  newStreamSink(cfg.Sink, r.strat),
		ID:                    cfg.ID,
		BatchSize:             cfg.BatchSize,
		MaxRun:                cfg.MaxRun,
		MaxRunBytes:           cfg.MaxRunBytes,
		Workers:               (cfg.MaxInFlight + cfg.BatchSize - 1) / cfg.BatchSize,
		Lease:                 streamLease(cfg),
		PublishTimeout:        cfg.PublishTimeout,
		PollInterval:          streamPollInterval,
		IdleAfter:             -1,
		Linger:                -1,
		MaxAttempts:           cfg.MaxAttempts,
		RetryBase:             cfg.RetryBase,
		RetryMax:              cfg.RetryMax,
		UnavailableBackoffMax: cfg.UnavailableBackoffMax,
		ShutdownTimeout:       cfg.ShutdownTimeout,
		Logger:                log,
		// No Published: the session calls it once a record committed
		// (Relay.report), since MarkSent returns before that.
		Hooks: relay.Hooks{Failed: failed},
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// ID returns the relay's instance id.
func (r *Relay) ID() string { return r.cfg.ID }

// Slot returns the replication slot's name (after defaults).
func (r *Relay) Slot() string { return r.cfg.Slot }

// Publication returns the publication's name (after defaults).
func (r *Relay) Publication() string { return r.cfg.Publication }

// Start launches the relay and returns at once. The relay becomes the
// active one for its slot, or waits as a standby until the active one dies.
// ctx bounds the whole run: when it is done the relay stops as if Stop had
// been called.
func (r *Relay) Start(ctx context.Context) error {
	return r.run.Start(ErrAlreadyStarted, func() error { return r.start(ctx) })
}

// start is Start's work, done once.
func (r *Relay) start(ctx context.Context) error {
	r.runCtx, r.runStop = context.WithCancel(context.WithoutCancel(ctx))
	r.sendCtx, r.sendStop = context.WithCancel(context.WithoutCancel(ctx))
	// The core outlives stop: it publishes what the last session's ledger
	// holds while that session drains, and is stopped after it.
	if err := r.core.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("cdc: start the stream's relay core: %w", err)
	}
	if err := r.table.Start(r.runCtx); err != nil {
		return fmt.Errorf("cdc: start the table path: %w", err)
	}
	r.stopping.CloseOn(ctx)
	go func() {
		err := r.loop()
		stopCtx, cancel := context.WithTimeout(context.Background(), r.cfg.ShutdownTimeout+r.cfg.Lease)
		if serr := r.core.Stop(stopCtx); serr != nil {
			r.log.Warn("the stream's relay core did not stop in time", slog.Any("error", serr))
		}
		if serr := r.table.Stop(stopCtx); serr != nil {
			r.log.Warn("table path did not stop in time", slog.Any("error", serr))
		}
		cancel()
		r.sendStop()
		r.runStop()
		r.err = err
		close(r.done)
	}()
	r.log.Info("cdc relay started", slog.String("publication", r.cfg.Publication),
		slog.String("schema", r.cfg.Schema), slog.Int("batch_size", r.cfg.BatchSize),
		slog.String("cleanup", r.cfg.Cleanup.String()))
	return nil
}

// Stop stops reading the stream, waits up to Config.ShutdownTimeout for the
// acks of the batches in flight (recording them and confirming their
// position),
// then cancels what is left, which the next active relay sends again. It
// returns when everything has finished, or with ctx's error if ctx ends
// first. Calling it again, or on a relay that never started, is safe. It
// returns the fatal error that stopped the relay, if any (see [Relay.Err]).
func (r *Relay) Stop(ctx context.Context) error {
	if !r.run.Stop(r.stopping) {
		return nil
	}
	err := lifecycle.Drain(ctx, r.done, r.cfg.ShutdownTimeout, func() {
		r.log.Warn("shutdown timeout: cancelling unacknowledged publishes; the next active relay sends them again")
		r.sendStop()
	}, r.sendStop)
	if err != nil {
		return err
	}
	r.log.Info("cdc relay stopped")
	return r.err
}

// Stopped returns a channel closed when the relay has stopped, after Stop
// or after a fatal error.
func (r *Relay) Stopped() <-chan struct{} { return r.done }

// Err returns the fatal error that stopped the relay (wrapping
// [ErrSlotLost], [ErrNotReady] or [ErrNotCDCMode]), or nil. It is valid once Stopped is
// closed.
func (r *Relay) Err() error {
	select {
	case <-r.done:
		return r.err
	default:
		return nil
	}
}

// Run starts the relay and blocks until ctx is done or a fatal error stops
// it, then stops it gracefully. It returns nil after a clean stop, and the
// fatal error otherwise.
func (r *Relay) Run(ctx context.Context) error {
	if err := r.Start(ctx); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-r.done:
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), r.cfg.ShutdownTimeout+r.cfg.Lease+5*time.Second)
	defer cancel()
	return r.Stop(stopCtx)
}

// abort stops the relay like a crash: the replication connection's socket
// is closed without a last status update, publishes are cancelled, nothing
// more is marked. For tests.
func (r *Relay) abort() {
	r.aborted.Store(true)
	r.mu.Lock()
	if r.conn != nil {
		_ = r.conn.Close()
	}
	r.mu.Unlock()
	if r.sendStop != nil {
		r.sendStop()
	}
	r.stopping.Close()
}

// fatalError marks an error that ends the relay instead of a reconnect.
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }
func (e *fatalError) Unwrap() error { return e.err }

func fatal(err error) error { return &fatalError{err} }

// loop runs sessions until stop or a fatal error, which it returns.
func (r *Relay) loop() error {
	for !r.stopping.Closed() {
		err := r.session()
		if err == nil || r.stopping.Closed() {
			continue
		}
		if _, ok := errors.AsType[*fatalError](err); ok {
			r.log.Error("cdc relay stopped by an error it cannot recover from", slog.Any("error", err))
			return err
		}
		switch {
		case !errors.Is(err, pgstore.ErrNotMigrated):
			r.log.Warn("replication session ended; reconnecting", slog.Any("error", err),
				slog.Duration("retry_in", r.cfg.StandbyInterval))
		case r.notMigrated.Holds(time.Now()):
			// Logged when first seen and then every 30 s, not at every retry.
			r.log.Error("outbox tables missing; the relay retries until they exist", slog.Any("error", err))
		}
		r.stopping.Sleep(r.cfg.StandbyInterval)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cause
}

// session connects, waits to become the active relay for the slot, and
// streams until stop (nil) or an error.
func (r *Relay) session() error {
	conn, err := r.connect(r.runCtx)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.conn = conn.Conn()
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.conn = nil
		r.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(ctx)
	}()

	if err := r.setupTables(r.runCtx); err != nil {
		return err
	}
	if lasted, ended := r.notMigrated.Ended(time.Now()); ended {
		r.log.Info("outbox tables found; the relay goes on", slog.Duration("waited", lasted.Round(time.Second)))
	}
	lead, err := r.waitLead(conn)
	if err != nil || lead == nil {
		return err
	}
	defer r.endLead(lead)
	if err := r.checkMode(r.runCtx); err != nil {
		return err
	}
	start, err := r.setup(r.runCtx)
	if err == nil || errors.Is(err, ErrSlotLost) { // a switch out of CDC mode may have dropped it
		if err := r.confirmMode(r.runCtx); err != nil {
			return err
		}
	}
	if err != nil {
		return err
	}
	if err := r.waitSlotFree(r.runCtx); err != nil {
		return err
	}
	err = pglogrepl.StartReplication(r.runCtx, conn, r.cfg.Slot, 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{
			"proto_version '1'",
			"publication_names '" + r.cfg.Publication + "'", // nameRe: no quotes possible
			"messages 'true'",
		},
	})
	if err != nil {
		if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == sqlstateObjectInUse {
			// object_in_use: the last active relay's session has not ended
			// yet (it released the lock a moment before the slot).
			return fmt.Errorf("cdc: slot %s still in use; waiting: %w", r.cfg.Slot, err)
		}
		return fmt.Errorf("cdc: start replication on slot %s: %w", r.cfg.Slot, err)
	}
	r.log.Info("active: streaming from the slot", slog.String("from_lsn", start.String()))
	r.leader.Store(true)
	defer r.leader.Store(false)
	err = r.stream(conn, start)
	if lost := lead.lostErr(); lost != nil {
		return lost
	}
	return err
}

// connect opens the replication connection.
func (r *Relay) connect(ctx context.Context) (*pgconn.PgConn, error) {
	cfg, err := pgconn.ParseConfig(r.cfg.ConnString)
	if err != nil {
		return nil, fatal(fmt.Errorf("%w: ConnString: %w", ErrInvalidConfig, err))
	}
	// Settings that pgx and pgxpool read from a connection string but that
	// pgconn passes on to the server, which would refuse them.
	for k := range cfg.RuntimeParams {
		switch k {
		case "default_query_exec_mode", "statement_cache_capacity", "description_cache_capacity":
			delete(cfg.RuntimeParams, k)
		default:
			if len(k) > 5 && k[:5] == "pool_" {
				delete(cfg.RuntimeParams, k)
			}
		}
	}
	cfg.RuntimeParams["replication"] = "database"
	if _, ok := cfg.RuntimeParams["application_name"]; !ok {
		cfg.RuntimeParams["application_name"] = "outbox cdc relay"
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		if refusesReplication(err) {
			return nil, fatal(fmt.Errorf("%w: the server at ConnString (--database-url) refuses replication connections, "+
				"as connection poolers such as PgBouncer do: the CDC relay must connect to PostgreSQL directly "+
				"(behind a pooler in transaction mode, run the polling relay with --no-listen): %w", ErrNotReady, err))
		}
		return nil, fmt.Errorf("cdc: replication connection: %w", err)
	}
	return conn, nil
}

// refusesReplication reports whether err is a server's refusal of the
// startup parameter replication, as PgBouncer answers a replication
// connection ("unsupported startup parameter: replication", 08P01).
// PostgreSQL itself accepts the parameter and refuses a role without the
// REPLICATION attribute otherwise (42501).
func refusesReplication(err error) bool {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	return ok && pgErr.Code == "08P01" && strings.Contains(pgErr.Message, "startup parameter") &&
		strings.Contains(pgErr.Message, "replication")
}

// tryLock takes the session-level advisory lock that makes this relay the
// active one for the slot (with the slot's lease, lead.go). It is held by
// the replication connection's backend, so it ends when that connection
// does: a relay that dies, or whose connection is cut or terminated, lets
// a standby take over.
func (r *Relay) tryLock(ctx context.Context, conn *pgconn.PgConn) (bool, error) {
	// A replication connection speaks only the simple query protocol, so
	// the key, an integer, is written into the statement.
	res, err := conn.Exec(ctx, "SELECT pg_try_advisory_lock("+strconv.FormatInt(r.slotLockKey(), 10)+")").ReadAll()
	if err != nil {
		return false, err
	}
	if len(res) != 1 || len(res[0].Rows) != 1 || len(res[0].Rows[0]) != 1 {
		return false, errors.New("unexpected result of pg_try_advisory_lock")
	}
	return string(res[0].Rows[0][0]) == "t", nil
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/memo"
	"github.com/outbox-dev/outbox/metrics"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/relay/cdc"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// Relay modes (--mode), besides pgstore's claim, cursor and cdc.
const (
	// modeRecorded, the default, runs the mode the outbox records.
	modeRecorded = ""
	// modePolling runs the polling relay in claim or cursor mode,
	// whichever the outbox records: the --mode of releases before the
	// outbox recorded its mode.
	modePolling = "polling"
	modeCDC     = string(pgstore.ModeCDC)
)

// cdcFlags are the relay command's flags for CDC mode.
type cdcFlags struct {
	mode         string
	slot         string
	publication  string
	recreateSlot bool
	cleanup      string
	maxInFlight  int
	maxInFlightB int64

	// given names a flag of cdcOnlyFlags that was given, if any.
	given string
}

// cdcOnlyFlags are the flags that mean something only with --mode cdc.
var cdcOnlyFlags = []string{"slot", "publication", "recreate-slot", "cdc-cleanup", "cdc-max-in-flight", "cdc-max-in-flight-bytes"}

func addCDCFlags(fs *pflag.FlagSet, c *cdcFlags) {
	fs.StringVar(&c.mode, "mode", modeRecorded, "`mode` the relay must run in: claim, cursor or cdc (read the outbox inserts from the WAL by logical replication; see docs/cdc.md); polling means claim or cursor. The relay refuses to start when the outbox records another mode ('outbox mode'). Default: the mode the outbox records")
	fs.StringVar(&c.slot, "slot", "", "cdc mode: logical replication slot `name`, created if absent (default outbox_<schema>)")
	fs.StringVar(&c.publication, "publication", "", "cdc mode: publication `name` on the outbox table, created if absent (default the slot's name)")
	fs.BoolVar(&c.recreateSlot, "recreate-slot", false, "cdc mode: if the recorded slot was lost, create a new one; events still unsent in the table are sent first (see docs/cdc.md)")
	fs.StringVar(&c.cleanup, "cdc-cleanup", cdc.CleanupMarkSent.String(), "cdc mode: what happens to an event's row after the broker's ack: mark-sent or delete (\"write and forget\")")
	fs.IntVar(&c.maxInFlight, "cdc-max-in-flight", 0, "cdc mode: most `events` read from the WAL and not yet acknowledged and recorded; later batches are read, checked and published while earlier ones await acks (0 means 4 × --batch-size; the value of --batch-size turns pipelining off)")
	fs.Int64Var(&c.maxInFlightB, "cdc-max-in-flight-bytes", cdc.DefaultMaxInFlightBytes, "cdc mode: most `bytes` of events (payload, headers, keys) held from the WAL reader to their record; the process needs about 2 × (this + 8 × the largest event) + 64 MiB (see docs/cdc.md, Memory)")
}

// check applies cdc.Config's rules to the flags' values, so that an error
// names the flag, and returns --cdc-cleanup's value.
func (c *cdcFlags) check() (cdc.Cleanup, error) {
	var cleanup cdc.Cleanup
	switch c.cleanup {
	case cdc.CleanupMarkSent.String():
		cleanup = cdc.CleanupMarkSent
	case cdc.CleanupDelete.String():
		cleanup = cdc.CleanupDelete
	default:
		return 0, flagError("cdc-cleanup", "must be mark-sent or delete, not %q", c.cleanup)
	}
	if c.maxInFlight < 0 {
		return 0, flagError("cdc-max-in-flight", "must be 0 (4 × --batch-size) or more, not %d", c.maxInFlight)
	}
	if c.maxInFlightB < 1 {
		return 0, flagError("cdc-max-in-flight-bytes", "must be at least 1, not %d", c.maxInFlightB)
	}
	return cleanup, nil
}

// runRelayMode runs the relay in the mode the outbox records, which --mode,
// if given, must name: the polling relay (relay/modes) in claim and cursor
// mode, the CDC relay in CDC mode.
func (a *app) runRelayMode(cmd *cobra.Command, rf *relayFlags, kf *kafkaFlags, cf *cdcFlags, af *adminFlags) error {
	af.addrGiven = changed(cmd.Flags(), "metrics-addr")
	switch cf.mode {
	case modeCDC:
		return a.runRelayCDC(cmd, rf, kf, cf, af)
	case modeRecorded, modePolling, string(pgstore.ModeClaim), string(pgstore.ModeCursor):
	default:
		return flagError("mode", "must be claim, cursor or cdc (or polling: claim or cursor), not %q", cf.mode)
	}
	for _, name := range cdcOnlyFlags {
		if changed(cmd.Flags(), name) {
			cf.given = name
		}
	}
	if cf.given != "" && cf.mode != modeRecorded {
		return flagError(cf.given, "applies only to --mode cdc")
	}
	if _, err := cf.check(); err != nil { // for the CDC relay, if the outbox is in CDC mode
		return err
	}
	err := a.runRelay(cmd, rf, kf, af, cf)
	if !errors.Is(err, errRecordedCDC) {
		return err
	}
	a.logger.Info("the outbox is in cdc mode: running the CDC relay", slog.String("schema", a.schema))
	return a.runRelayCDC(cmd, rf, kf, cf, af)
}

// errRecordedCDC is runRelay's error for an outbox in CDC mode when --mode
// was not given: runRelayMode runs the CDC relay instead.
var errRecordedCDC = errors.New("the outbox is in cdc mode")

// checkMode reads the mode the outbox records, and refuses,
// naming both modes and the fix, when --mode names another (a flag of CDC
// mode given without --mode is ignored, with a warning, outside CDC mode);
// it returns errRecordedCDC when --mode was not given, the outbox is in CDC
// mode and the polling relay (relay/modes, not cdcRelay) was started. Without outbox
// tables it lets the relay start (and wait for them) in claim mode: a new
// outbox is in claim mode, and the CDC relay checks the mode itself once
// the tables exist.
func (a *app) checkMode(ctx context.Context, st *pgstore.Store, cf *cdcFlags, cdcRelay bool) error {
	want := cf.mode
	m, err := st.Mode(ctx)
	if errors.Is(err, pgstore.ErrNotMigrated) {
		return nil
	}
	if err != nil {
		return err
	}
	got := string(m.Mode)
	conflict := want != modeRecorded && want != got && (want != modePolling || m.Mode == pgstore.ModeCDC)
	switch {
	case conflict && want == modePolling:
		return fmt.Errorf("the outbox in schema %s is in cdc mode, and --mode polling runs claim or cursor mode; "+
			"run 'outbox mode set claim' to switch, or start the relay without --mode", st.Schema())
	case conflict:
		return fmt.Errorf("the outbox in schema %s is in %s mode, not %s; run 'outbox mode set %s' to switch, "+
			"or start the relay without --mode", st.Schema(), got, want, want)
	case m.Mode == pgstore.ModeCDC && !cdcRelay:
		return errRecordedCDC
	case m.Mode != pgstore.ModeCDC && cdcRelay && want == modeRecorded:
		return fmt.Errorf("the outbox in schema %s switched to %s mode while the relay started; start it again", st.Schema(), got)
	}
	if cf.given != "" && !cdcRelay {
		a.logger.Warn("a flag of CDC mode is ignored: the outbox is in "+got+" mode", slog.String("flag", "--"+cf.given))
	}
	a.logger.Info("relay mode", slog.String("mode", got), slog.Bool("recorded", m.Recorded),
		slog.Time("since", m.Since), slog.String("by", m.By))
	return nil
}

// runRelayCDC checks every setting before it touches the network, then runs
// the CDC relay until the command's context is done or a fatal error (a
// lost slot, an outbox not in CDC mode) stops it.
func (a *app) runRelayCDC(cmd *cobra.Command, rf *relayFlags, kf *kafkaFlags, cf *cdcFlags, af *adminFlags) error {
	ctx := cmd.Context()
	if err := rf.check(); err != nil {
		return err
	}
	cleanup, err := cf.check()
	if err != nil {
		return err
	}
	if _, err := kf.config(a.logger); err != nil {
		return err
	}
	// The batch checks and marks, the table path, heartbeats and setup; the
	// replication connection is separate.
	pool, err := a.newPool("cdc relay", 6)
	if err != nil {
		return err
	}
	defer pool.Close()
	snk, err := kf.newSink(a.logger, cdcCalls(rf, cf))
	if err != nil {
		return err
	}
	defer func() {
		if err := snk.Close(); err != nil {
			a.logger.Warn("closing the Kafka client", slog.Any("error", err))
		}
	}()
	// The metrics' hooks exist once the admin endpoint runs, which needs the
	// relay (for the slot's lag); the relay calls them only after Run.
	var hooks relay.Hooks
	r, err := cdc.New(a.cdcConfig(rf, cf, cleanup, pool, snk, &hooks))
	if err != nil {
		return cdcConfigError(err)
	}
	// Health, the relay's and the table's metrics, the slot's lag (read at
	// most once per statsInterval, however many scrape), and the status page.
	lag := memo.New(func(ctx context.Context) (metrics.SlotLag, error) {
		l, err := r.Lag(ctx)
		return metrics.SlotLag{Bytes: l.Bytes, Age: l.Age, Active: l.Active}, err
	}, statsInterval, 5*time.Second)
	af.cdcRelay = true
	adm, err := a.startAdmin(ctx, af, pool, snk, r.ID(), func(reg prometheus.Registerer) error {
		return metrics.NewSlotLag(reg, r.Slot(), lag.Get)
	})
	if err != nil {
		return err
	}
	defer adm.close()
	hooks = adm.hooks
	attrs := []any{
		slog.String("relay_id", r.ID()),
		slog.String("mode", modeCDC),
		slog.String("schema", a.schema),
		slog.String("slot", r.Slot()),
		slog.String("publication", r.Publication()),
		slog.String("database", RedactURL(a.databaseURL)),
	}
	attrs = append(attrs, kf.logAttrs()...)
	a.logger.Info("relay starting", attrs...)

	if err := a.awaitDependencies(ctx, pool, snk); err != nil {
		return err
	}
	if ctx.Err() == nil {
		st, err := a.newStore(pool)
		if err != nil {
			return err
		}
		if err := a.checkMode(ctx, st, cf, true); err != nil {
			return err
		}
		if err := r.Run(ctx); err != nil {
			return fmt.Errorf("relay %s: %w", r.ID(), err)
		}
	}
	a.logger.Info("relay exited", slog.String("relay_id", r.ID()))
	return nil
}

// cdcCalls is how many batches the CDC relay publishes at once: its core's
// workers, ceil(MaxInFlight / BatchSize) (MaxInFlight 0: the default
// number of batches).
func cdcCalls(rf *relayFlags, cf *cdcFlags) int {
	if cf.maxInFlight <= 0 || rf.batchSize <= 0 {
		return cdc.DefaultInFlightBatches
	}
	return (cf.maxInFlight + rf.batchSize - 1) / rf.batchSize
}

// cdcConfig returns the cdc.Config for the flags, with pool and sink. Its
// hooks call *hooks, which the admin endpoint fills in once it runs.
func (a *app) cdcConfig(rf *relayFlags, cf *cdcFlags, cleanup cdc.Cleanup, pool *pgxpool.Pool, snk sink.Sink, hooks *relay.Hooks) cdc.Config {
	return cdc.Config{
		Pool:                  pool,
		Sink:                  snk,
		ConnString:            a.databaseURL,
		Schema:                a.schema,
		Slot:                  cf.slot,
		Publication:           cf.publication,
		RecreateSlot:          cf.recreateSlot,
		Cleanup:               cleanup,
		ID:                    rf.id,
		BatchSize:             rf.batchSize,
		MaxRun:                rf.maxRun,
		MaxRunBytes:           rf.maxRunBytes,
		MaxInFlight:           cf.maxInFlight,
		MaxInFlightBytes:      cf.maxInFlightB,
		PublishTimeout:        rf.publishTimeout,
		TablePathInterval:     rf.pollInterval,
		Lease:                 rf.lease,
		MaxAttempts:           rf.maxAttempts,
		RetryBase:             rf.retryBase,
		RetryMax:              rf.retryMax,
		UnavailableBackoffMax: rf.unavailableBackoffMax,
		ShutdownTimeout:       rf.shutdownTimeout,
		Logger:                a.logger,
		Hooks: cdc.Hooks{
			Published: func(rec outbox.Record, since time.Duration) {
				if hooks.Published != nil {
					hooks.Published(rec, since)
				}
			},
			Failed: func(rec outbox.Record, err error, dead bool) {
				if hooks.Failed != nil {
					hooks.Failed(rec, err, dead)
				}
			},
		},
	}
}

// cdcConfigError points a cdc.New error at the flag that sets the field it
// names.
func cdcConfigError(err error) error {
	if !errors.Is(err, cdc.ErrInvalidConfig) {
		return err
	}
	for field, flag := range map[string]string{
		"Slot": "slot", "Publication": "publication", "Schema": "schema", "ConnString": "database-url",
		"MaxInFlight": "cdc-max-in-flight", "MaxInFlightBytes": "cdc-max-in-flight-bytes",
	} {
		if strings.HasPrefix(err.Error(), cdc.ErrInvalidConfig.Error()+": "+field+" ") {
			return flagError(flag, "is not usable: %v", err)
		}
	}
	return &usageError{fmt.Errorf("relay settings: %w", err)}
}

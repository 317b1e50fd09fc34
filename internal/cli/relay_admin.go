package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/pflag"

	"github.com/outbox-dev/outbox/admin"
	"github.com/outbox-dev/outbox/metrics"
	"github.com/outbox-dev/outbox/ops"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/sink/kafka"
	"github.com/outbox-dev/outbox/statuspage"
)

// The admin endpoint's reads of the database run on a pool of their own, of
// adminPoolSize connections, so that no number of scrapers, probes or page
// views can take a connection the relay needs. The table's statistics are
// read at most once per statsInterval, shared by /metrics, the status page
// and its chart.
const (
	adminPoolSize = 2
	statsInterval = 5 * time.Second
)

// adminFlags are the relay's operator endpoint and retention loop.
type adminFlags struct {
	metricsAddr      string
	statusToken      string
	cleanupOlderThan string
	cleanupInterval  time.Duration

	// addrGiven is set when --metrics-addr (or its variable) was given:
	// an address that cannot be bound is then an error, where the default
	// one only turns the endpoint off.
	addrGiven bool
	// cdcRelay is set when the relay is the CDC relay, for the readiness
	// check of the mode (modeReady).
	cdcRelay bool
}

func addAdminFlags(fs *pflag.FlagSet, f *adminFlags) {
	fs.StringVar(&f.metricsAddr, "metrics-addr", admin.DefaultAddr,
		"`host:port` of the admin endpoint: /metrics (Prometheus), /healthz, /readyz and the status page at /; loopback by default; \"off\" disables it. "+
			"If the default address is taken (another relay on this host), the relay runs without the endpoint; give each relay its own, or 127.0.0.1:0 for any free port")
	fs.StringVar(&f.statusToken, "status-token", "",
		"`token` that enables replay and discard on the status page; required to view it when --metrics-addr is not loopback")
	fs.StringVar(&f.cleanupOlderThan, "cleanup-older-than", "",
		"delete SENT messages older than this `age` (e.g. 7d) in bounded batches, every --cleanup-interval; on a partitioned outbox, drop whole partitions and create the next ones (default: no cleanup in the relay)")
	fs.DurationVar(&f.cleanupInterval, "cleanup-interval", time.Hour, "how often the relay's retention loop runs (with --cleanup-older-than)")
	markSensitive(fs, "status-token")
}

// cleanupAge is --cleanup-older-than, 0 when not set.
func (f *adminFlags) cleanupAge() (time.Duration, error) {
	if f.cleanupOlderThan == "" {
		return 0, nil
	}
	d, err := parseAge(f.cleanupOlderThan)
	if err != nil || d <= 0 {
		return 0, flagError("cleanup-older-than", "must be a positive age such as 7d or 36h, not %q", f.cleanupOlderThan)
	}
	if f.cleanupInterval <= 0 {
		return 0, flagError("cleanup-interval", "must be positive, not %s", f.cleanupInterval)
	}
	return d, nil
}

// relayAdmin is what startAdmin started; close stops it.
type relayAdmin struct {
	hooks relay.Hooks
	close func()
}

// startAdmin starts the admin endpoint (metrics, health, status page) and
// the retention loop, as the flags say, and the reports of the sink's topics
// to the database (for 'outbox stats' and every status page). The relay's
// hooks feed the metrics. The retention loop and the reports work on the
// relay's pool; the endpoint opens its own. extra, if not nil, registers
// mode-specific metrics (the CDC slot's lag).
func (a *app) startAdmin(ctx context.Context, f *adminFlags, pool *pgxpool.Pool, snk *kafka.Sink, relayID string, extra func(prometheus.Registerer) error) (*relayAdmin, error) {
	cleanupAge, err := f.cleanupAge()
	if err != nil {
		return nil, err
	}
	res := &relayAdmin{close: func() {}}
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var stops []func()
	res.close = func() {
		cancel()
		for _, s := range stops {
			s()
		}
	}
	stop, err := a.reportTopics(bg, pool, snk, relayID)
	if err != nil {
		res.close()
		return nil, err
	}
	stops = append(stops, stop)
	if cleanupAge > 0 {
		stop, err := a.startRetention(bg, pool, cleanupAge, f.cleanupInterval)
		if err != nil {
			res.close()
			return nil, err
		}
		stops = append(stops, stop)
	}
	if f.metricsAddr == "off" {
		return res, nil
	}
	hooks, stop, err := a.startAdminServer(bg, f, snk, extra)
	if err != nil {
		res.close()
		return nil, err
	}
	res.hooks = hooks
	stops = append(stops, stop)
	return res, nil
}

// startRetention runs the retention loop until ctx ends; the returned func
// waits for it to stop. It drops whole partitions on a partitioned table,
// deletes rows on a plain one.
func (a *app) startRetention(ctx context.Context, pool *pgxpool.Pool, olderThan, every time.Duration) (func(), error) {
	o, err := ops.New(pool, ops.Config{Schema: a.schema, Logger: a.logger})
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := o.RetentionEvery(ctx, ops.CleanupConfig{OlderThan: olderThan, Actor: "relay"}, every)
		if err != nil && ctx.Err() == nil {
			a.logger.Error("retention loop stopped", slog.Any("error", err))
		}
	}()
	a.logger.Info("retention loop on", slog.Duration("older_than", olderThan), slog.Duration("interval", every))
	return func() { <-done }, nil
}

// startAdminServer opens the admin's pool and serves the endpoint until
// the returned stop. If the default address is taken it warns and serves
// nothing; an address given explicitly that cannot be bound is an error.
func (a *app) startAdminServer(ctx context.Context, f *adminFlags, snk *kafka.Sink, extra func(prometheus.Registerer) error) (relay.Hooks, func(), error) {
	pool, err := a.newPool("relay admin", adminPoolSize)
	if err != nil {
		return relay.Hooks{}, nil, err
	}
	srv, page, hooks, err := a.newAdminServer(f, pool, snk, extra)
	if err == nil {
		err = srv.Start()
	}
	switch {
	case err != nil && !f.addrGiven && errors.Is(err, syscall.EADDRINUSE):
		pool.Close()
		a.logger.Warn("admin endpoint off: its default address is in use, probably by another relay on this host. "+
			"The relay runs without /metrics, /readyz and the status page; give each relay its own --metrics-addr "+
			"(another port, or 127.0.0.1:0 for any free one)", slog.String("addr", f.metricsAddr))
		return hooks, func() {}, nil
	case errors.Is(err, syscall.EADDRINUSE):
		pool.Close()
		return relay.Hooks{}, nil, flagError("metrics-addr", "%s is in use: choose another address, 127.0.0.1:0 for any free port, or \"off\"", f.metricsAddr)
	case err != nil:
		pool.Close()
		return relay.Hooks{}, nil, &usageError{fmt.Errorf("--metrics-addr: %w", err)}
	}
	if page != nil {
		go page.Sample(ctx)
	}
	a.logger.Info("admin endpoint listening", slog.String("addr", srv.Addr()),
		slog.String("paths", "/metrics /healthz /readyz /"))
	return hooks, func() {
		c, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		_ = srv.Close(c)
		pool.Close()
	}, nil
}

// newAdminServer builds the endpoint on the admin's pool: the metrics, with
// the table's gauges and the status page reading one shared statistics
// snapshot, and the readiness checks. page is nil when the status page is
// off.
func (a *app) newAdminServer(f *adminFlags, pool *pgxpool.Pool, snk *kafka.Sink, extra func(prometheus.Registerer) error) (*admin.Server, *statuspage.Page, relay.Hooks, error) {
	o, err := ops.New(pool, ops.Config{Schema: a.schema, Logger: a.logger})
	if err != nil {
		return nil, nil, relay.Hooks{}, err
	}
	stats := ops.NewStatsCache(o, statsInterval)
	reg, hooks, err := newAdminRegistry(stats, func(reg prometheus.Registerer) error {
		if err := metrics.NewTopics(reg, snk.Topics); err != nil {
			return err
		}
		if extra != nil {
			return extra(reg)
		}
		return nil
	})
	if err != nil {
		return nil, nil, relay.Hooks{}, err
	}
	srv, err := admin.New(admin.Config{Addr: f.metricsAddr, Gatherer: reg, Logger: a.logger, Checks: map[string]admin.Check{
		"database": func(ctx context.Context) error { return pool.Ping(ctx) },
		"outbox":   o.CheckMigrated, // the tables exist: not before 'outbox migrate'
		"kafka":    snk.Ping,
		"topics":   func(context.Context) error { return topicsReady(snk.Topics()) },
		"mode":     modeReady(a.schema, stats, f.cdcRelay),
	}})
	if err != nil {
		return nil, nil, relay.Hooks{}, &usageError{fmt.Errorf("--metrics-addr: %w", err)}
	}
	loopback := admin.IsLoopback(f.metricsAddr)
	if !loopback && f.statusToken == "" {
		a.logger.Warn("status page off: --metrics-addr is not loopback and no --status-token is set")
		return srv, nil, hooks, nil
	}
	page, err := statuspage.New(statuspage.Config{Ops: o, Stats: stats.Stats, Token: f.statusToken,
		RequireTokenToView: !loopback, Actor: "status-page", Logger: a.logger})
	if err != nil {
		return nil, nil, relay.Hooks{}, err
	}
	srv.Handle("/", page)
	return srv, page, hooks, nil
}

// newAdminRegistry registers the process's, the relay's and the table's
// metrics, and extra's; the table's gauges read stats.
func newAdminRegistry(stats *ops.StatsCache, extra func(prometheus.Registerer) error) (*prometheus.Registry, relay.Hooks, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := metrics.NewRelay(reg)
	if err != nil {
		return nil, relay.Hooks{}, err
	}
	snapshot := func(ctx context.Context) (metrics.Snapshot, error) {
		s, err := stats.Stats(ctx)
		if err != nil {
			return metrics.Snapshot{}, err
		}
		return metricsSnapshot(s), nil
	}
	if err := metrics.NewTable(reg, snapshot, 5*time.Second); err != nil {
		return nil, relay.Hooks{}, err
	}
	if extra != nil {
		if err := extra(reg); err != nil {
			return nil, relay.Hooks{}, err
		}
	}
	return reg, m.Hooks(), nil
}

// metricsSnapshot is what the table gauges export of s.
func metricsSnapshot(s ops.Stats) metrics.Snapshot {
	m := metrics.Snapshot{Counts: s.Counts, OldestUnsentAge: s.OldestUnsentAge, BlockedAggregates: s.BlockedAggregates,
		Mode: string(s.Cursor.Mode)}
	if c := s.Cursor; c.Present {
		m.Cursor = metrics.CursorSnapshot{Active: c.Mode == ops.ModeCursor, Position: c.Position, Leading: c.Leading,
			SavedAge: max(c.At.Sub(c.SavedAt), 0), LagMessages: c.LagMessages, LagAge: c.LagAge}
	}
	return m
}

// topicReportEvery is how often a relay reports its sink's topics to the
// database (ops.ReportTopics).
const topicReportEvery = 10 * time.Second

// reportTopics reports the sink's topics every topicReportEvery until ctx
// is done, and once more then; the returned func waits for that.
func (a *app) reportTopics(ctx context.Context, pool *pgxpool.Pool, snk *kafka.Sink, relayID string) (wait func(), err error) {
	o, err := ops.New(pool, ops.Config{Schema: a.schema, Logger: a.logger})
	if err != nil {
		return nil, err
	}
	report := func(ctx context.Context) {
		if err := o.ReportTopics(ctx, relayID, snk.Topics()); err != nil && ctx.Err() == nil {
			a.logger.Debug("reporting the topics", slog.Any("error", err))
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(topicReportEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				last, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				report(last)
				cancel()
				return
			case <-t.C:
				report(ctx)
			}
		}
	}()
	return func() { <-done }, nil
}

// modeReady is the readiness check of the relay's mode: not ready, saying
// what to do, while the outbox records a mode this relay does not serve
// (it was switched while the relay ran). It reads the shared statistics
// snapshot; when that fails, the database and outbox checks say why.
func modeReady(schema string, stats *ops.StatsCache, cdcRelay bool) admin.Check {
	return func(ctx context.Context) error {
		s, err := stats.Stats(ctx)
		if err != nil {
			return nil
		}
		switch m := s.Cursor.Mode; {
		case cdcRelay && m != ops.ModeCDC:
			return fmt.Errorf("the outbox in schema %s is in %s mode, not cdc: stop this CDC relay and run the relays of %s mode ('outbox relay' without --mode)",
				schema, m, m)
		case !cdcRelay && m == ops.ModeCDC:
			return fmt.Errorf("the outbox in schema %s is in cdc mode: restart this relay without --mode to run the CDC relay (it goes on claiming meanwhile, which is safe)",
				schema)
		}
		return nil
	}
}

// topicsReady is the readiness of the topics: an error naming each topic
// that cannot take records, with the broker's reason and the fix.
func topicsReady(topics []sink.TopicStatus) error {
	var bad []string
	for _, t := range topics {
		if t.Unavailable() {
			bad = append(bad, fmt.Sprintf("%s (%s since %s: %s)", t.Topic, t.Reason,
				t.UnavailableSince.UTC().Format(time.RFC3339), t.Fix))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("topics that cannot take records, their messages wait: %s", strings.Join(bad, "; "))
}

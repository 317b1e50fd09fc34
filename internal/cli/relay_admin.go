package cli

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/pflag"

	"github.com/outbox-dev/outbox/admin"
	"github.com/outbox-dev/outbox/metrics"
	"github.com/outbox-dev/outbox/ops"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/statuspage"
)

// adminFlags are the relay's operator endpoint and retention loop.
type adminFlags struct {
	metricsAddr      string
	statusToken      string
	cleanupOlderThan string
	cleanupInterval  time.Duration
}

func addAdminFlags(fs *pflag.FlagSet, f *adminFlags) {
	fs.StringVar(&f.metricsAddr, "metrics-addr", admin.DefaultAddr,
		"`host:port` of the admin endpoint: /metrics (Prometheus), /healthz, /readyz and the status page at /; loopback by default; \"off\" disables it")
	fs.StringVar(&f.statusToken, "status-token", "",
		"`token` that enables replay and discard on the status page; required to view it when --metrics-addr is not loopback")
	fs.StringVar(&f.cleanupOlderThan, "cleanup-older-than", "",
		"delete SENT messages older than this `age` (e.g. 7d) in bounded batches, every --cleanup-interval; on a partitioned outbox, drop whole partitions and create the next ones (default: no cleanup in the relay)")
	fs.DurationVar(&f.cleanupInterval, "cleanup-interval", time.Hour, "how often the relay's retention loop runs (with --cleanup-older-than)")
	markSensitive(fs, "status-token")
}

// relayAdmin is what startAdmin started; close stops it.
type relayAdmin struct {
	hooks relay.Hooks
	close func()
}

// startAdmin starts the admin endpoint (metrics, health, status page) and
// the retention loop, as the flags say. The relay's hooks feed the metrics.
// extra, if not nil, registers mode-specific metrics (the CDC slot's lag).
func (a *app) startAdmin(ctx context.Context, f *adminFlags, pool *pgxpool.Pool, kafkaPing admin.Check, extra func(prometheus.Registerer) error) (*relayAdmin, error) {
	res := &relayAdmin{close: func() {}}
	var cleanupAge time.Duration
	if f.cleanupOlderThan != "" {
		d, err := parseAge(f.cleanupOlderThan)
		if err != nil || d <= 0 {
			return nil, flagError("cleanup-older-than", "must be a positive age such as 7d or 36h, not %q", f.cleanupOlderThan)
		}
		cleanupAge = d
		if f.cleanupInterval <= 0 {
			return nil, flagError("cleanup-interval", "must be positive, not %s", f.cleanupInterval)
		}
	}
	if f.metricsAddr == "off" && cleanupAge == 0 {
		return res, nil
	}
	o, err := ops.New(pool, ops.Config{Schema: a.schema, Logger: a.logger})
	if err != nil {
		return nil, err
	}
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var stops []func()
	res.close = func() {
		cancel()
		for _, s := range stops {
			s()
		}
	}
	if cleanupAge > 0 {
		done := make(chan struct{})
		go func() {
			defer close(done)
			// Drops whole partitions on a partitioned table, deletes rows on a plain one.
			err := o.RetentionEvery(bg, ops.CleanupConfig{OlderThan: cleanupAge, Actor: "relay"}, f.cleanupInterval)
			if err != nil && bg.Err() == nil {
				a.logger.Error("retention loop stopped", slog.Any("error", err))
			}
		}()
		stops = append(stops, func() { <-done })
		a.logger.Info("retention loop on", slog.Duration("older_than", cleanupAge), slog.Duration("interval", f.cleanupInterval))
	}
	if f.metricsAddr == "off" {
		return res, nil
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := metrics.NewRelay(reg)
	if err != nil {
		res.close()
		return nil, err
	}
	res.hooks = m.Hooks()
	snapshot := func(ctx context.Context) (metrics.Snapshot, error) {
		s, err := o.Stats(ctx)
		if err != nil {
			return metrics.Snapshot{}, err
		}
		return metricsSnapshot(s), nil
	}
	if err := metrics.NewTable(reg, snapshot, 5*time.Second); err != nil {
		res.close()
		return nil, err
	}
	if extra != nil {
		if err := extra(reg); err != nil {
			res.close()
			return nil, err
		}
	}
	srv, err := admin.New(admin.Config{Addr: f.metricsAddr, Gatherer: reg, Logger: a.logger, Checks: map[string]admin.Check{
		"database": func(ctx context.Context) error { return pool.Ping(ctx) },
		"outbox":   o.CheckMigrated, // the tables exist: not before 'outbox migrate'
		"kafka":    kafkaPing,
	}})
	if err != nil {
		res.close()
		return nil, &usageError{fmt.Errorf("--metrics-addr: %w", err)}
	}
	loopback := admin.IsLoopback(f.metricsAddr)
	if !loopback && f.statusToken == "" {
		a.logger.Warn("status page off: --metrics-addr is not loopback and no --status-token is set")
	} else {
		page, err := statuspage.New(statuspage.Config{Ops: o, Token: f.statusToken, RequireTokenToView: !loopback, Actor: "status-page", Logger: a.logger})
		if err != nil {
			res.close()
			return nil, err
		}
		srv.Handle("/", page)
		go page.Sample(bg)
	}
	if err := srv.Start(); err != nil {
		res.close()
		return nil, &usageError{fmt.Errorf("--metrics-addr: %w", err)}
	}
	stops = append(stops, func() {
		c, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		_ = srv.Close(c)
	})
	a.logger.Info("admin endpoint listening", slog.String("addr", srv.Addr()),
		slog.String("paths", "/metrics /healthz /readyz /"))
	return res, nil
}

// metricsSnapshot is what the table gauges export of s.
func metricsSnapshot(s ops.Stats) metrics.Snapshot {
	m := metrics.Snapshot{Counts: s.Counts, OldestUnsentAge: s.OldestUnsentAge, BlockedAggregates: s.BlockedAggregates}
	if c := s.Cursor; c.Present {
		m.Cursor = metrics.CursorSnapshot{Active: c.Mode == ops.ModeCursor, Position: c.Position, Leading: c.Leading,
			SavedAge: max(c.At.Sub(c.SavedAt), 0), LagMessages: c.LagMessages, LagAge: c.LagAge}
	}
	return m
}

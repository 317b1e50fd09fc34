package orderservice

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox/examples/orders/internal/process"
	"github.com/outbox-dev/outbox/sink/kafka"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// Defaults of [RunConfig].
const (
	// DefaultListen is the default of RunConfig.Listen.
	DefaultListen = "127.0.0.1:8080"
	// DefaultMaxConns is the default of RunConfig.MaxConns: one connection
	// per request in progress (more requests wait for one).
	DefaultMaxConns = 10
	// ShutdownTimeout is how long [Run] lets the requests in progress
	// finish once its context ends.
	ShutdownTimeout = 10 * time.Second
)

// RunConfig configures [Run]: the order service as a process of its own.
type RunConfig struct {
	// DatabaseURL is the PostgreSQL database of the orders and their
	// outbox. Exactly one of DatabaseURL, Pool and SQLitePath is required.
	DatabaseURL string
	// Pool is an open pool of that database, used as it is; the caller
	// closes it.
	Pool *pgxpool.Pool
	// OutboxSchema is the PostgreSQL schema of the outbox, whose tables
	// 'outbox migrate' creates; a relay of its own ('outbox relay')
	// publishes it. Defaults to "outbox".
	OutboxSchema string
	// SQLitePath is a SQLite file that holds the orders and their outbox,
	// created if missing. A relay in the process publishes the outbox to
	// Brokers.
	SQLitePath string
	// Brokers are the Kafka seed brokers of the relay of a SQLite outbox,
	// with Security; required with SQLitePath, not used on PostgreSQL.
	Brokers  []string
	Security kafka.Security
	// Listen is the host:port of the HTTP API (port 0 picks a free port).
	// Defaults to 127.0.0.1:8080.
	Listen string
	// MaxConns bounds the pool Run opens from DatabaseURL. Defaults to 10.
	MaxConns int32
	// Service configures the service (its schema, topic, event version,
	// body limit and logger).
	Service Config
	// Ready, if not nil, is called with the address the API listens on,
	// once it does.
	Ready func(addr string)
}

func (c RunConfig) withDefaults() RunConfig {
	c.OutboxSchema = cmp.Or(c.OutboxSchema, pgstore.DefaultSchema)
	c.Listen = cmp.Or(c.Listen, DefaultListen)
	c.MaxConns = cmp.Or(c.MaxConns, DefaultMaxConns)
	c.Service = c.Service.withDefaults()
	return c
}

func (c RunConfig) where() process.Where {
	return process.Where{DatabaseURL: c.DatabaseURL, Pool: c.Pool, SQLitePath: c.SQLitePath}
}

func (c RunConfig) validate() error {
	if err := c.where().Check(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if c.SQLitePath != "" && len(c.Brokers) == 0 {
		return fmt.Errorf("%w: Brokers is required with SQLitePath (the process relays its outbox)", ErrInvalidConfig)
	}
	return nil
}

// Run runs the order service until ctx ends: it opens the database,
// creates the service's tables if they are missing, and serves the HTTP
// API on cfg.Listen. On SQLite it migrates the outbox too and relays it to
// Kafka. When ctx ends it lets the requests in progress finish (for up to
// ShutdownTimeout), stops the relay, if any, and returns nil. An error of
// the service's configuration wraps [ErrInvalidConfig] and names the
// field.
func Run(ctx context.Context, cfg RunConfig) error {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return err
	}
	log := cfg.Service.Logger
	d, err := process.Open(ctx, cfg.where(), "orders", cfg.MaxConns)
	if err != nil {
		return fmt.Errorf("orderservice: %w", err)
	}
	defer d.Close()
	sink := kafka.Config{Brokers: cfg.Brokers, Security: cfg.Security, ClientID: "outbox-example-orders-relay",
		DefaultTopic: cfg.Service.Topic, Logger: log}
	ob, err := d.Outbox(ctx, cfg.OutboxSchema, sink, log)
	if err != nil {
		return fmt.Errorf("orderservice: %w", err)
	}
	newService := New
	if d.SQLite() {
		newService = NewSQLite
	}
	svc, err := newService(d.DB, ob, cfg.Service)
	if err != nil {
		return err
	}
	if err := svc.Migrate(ctx); err != nil {
		return err
	}
	return serve(ctx, svc, cfg, log, d)
}

// serve serves svc's API on cfg.Listen until ctx ends.
func serve(ctx context.Context, svc *Service, cfg RunConfig, log *slog.Logger, d *process.Database) error {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	srv := svc.HTTPServer()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	addr := ln.Addr().String()
	where := slog.String("outbox_schema", cfg.OutboxSchema)
	if d.SQLite() {
		where = slog.String("sqlite", d.SQLitePath)
	}
	log.Info("order service started", slog.String("addr", addr), slog.String("orders_schema", svc.Schema()), where,
		slog.String("topic", cfg.Service.Topic), slog.Int("order_placed_version", cfg.Service.PlacedVersion))
	if cfg.Ready != nil {
		cfg.Ready(addr)
	}
	select {
	case err := <-served:
		return fmt.Errorf("serve HTTP on %s: %w", addr, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("order service: requests still running at shutdown", slog.Any("error", err))
	}
	log.Info("order service stopped")
	return nil
}

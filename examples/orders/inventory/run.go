package inventory

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox/consumer"
	"github.com/outbox-dev/outbox/examples/orders/events"
	"github.com/outbox-dev/outbox/examples/orders/internal/process"
	"github.com/outbox-dev/outbox/inbox"
	"github.com/outbox-dev/outbox/sink/kafka"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// Defaults of [RunConfig].
const (
	// DefaultMaxConns is the default of RunConfig.MaxConns: one connection
	// per partition being handled, plus the inbox's checks.
	DefaultMaxConns = 6
	// DefaultStatsInterval is the default of RunConfig.StatsInterval.
	DefaultStatsInterval = 10 * time.Second
)

// RunConfig configures [Run]: the inventory as a process of its own.
type RunConfig struct {
	// DatabaseURL is the PostgreSQL database of the inventory's tables,
	// its inbox and its outbox. Exactly one of DatabaseURL, Pool and
	// SQLitePath is required.
	DatabaseURL string
	// Pool is an open pool of that database, used as it is; the caller
	// closes it.
	Pool *pgxpool.Pool
	// OutboxSchema is the PostgreSQL schema of the outbox, whose tables
	// 'outbox migrate' creates; a relay of its own ('outbox relay')
	// publishes it. Defaults to "outbox".
	OutboxSchema string
	// InboxSchema is the PostgreSQL schema of the inbox. Defaults to
	// "inbox".
	InboxSchema string
	// SQLitePath is a SQLite file that holds the inventory's tables, its
	// inbox and its outbox, created if missing. A relay in the process
	// publishes the outbox to the consumer's brokers.
	SQLitePath string
	// MaxConns bounds the pool Run opens from DatabaseURL. Defaults to 6.
	MaxConns int32
	// Inventory configures the inventory (its schema, topic, stock and
	// logger).
	Inventory Config
	// Consumer configures the consumer group: Brokers (required),
	// Security, Topics (defaults to the orders topic), and the retry,
	// timeout and membership settings. Run sets Group, Applier, ClientID,
	// Hooks and Logger (Inventory.Logger).
	Consumer consumer.Config
	// StatsInterval is how often the counts of processed, duplicate and
	// parked events are logged (when they changed). Defaults to 10s.
	StatsInterval time.Duration
}

func (c RunConfig) where() process.Where {
	return process.Where{DatabaseURL: c.DatabaseURL, Pool: c.Pool, SQLitePath: c.SQLitePath}
}

// Run runs the inventory until ctx ends: it opens the database, creates
// the inventory's tables (with Inventory.Stock) and the inbox's if they
// are missing, and applies the order events of its consumer group (Group)
// through the inbox, once each, enqueuing its own events to the outbox in
// the same transactions. On SQLite it migrates the outbox too and relays
// it to Kafka. It returns nil when ctx ends. An error of the inventory's
// configuration wraps [ErrInvalidConfig], of the inbox's
// inbox.ErrInvalidConfig, of the consumer's consumer.ErrInvalidConfig;
// each names the field.
func Run(ctx context.Context, cfg RunConfig) error {
	if err := cfg.where().Check(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	log := cmp.Or(cfg.Inventory.Logger, slog.Default())
	d, err := process.Open(ctx, cfg.where(), "inventory", cmp.Or(cfg.MaxConns, DefaultMaxConns))
	if err != nil {
		return fmt.Errorf("inventory: %w", err)
	}
	defer d.Close()
	sink := kafka.Config{Brokers: cfg.Consumer.Brokers, Security: cfg.Consumer.Security,
		ClientID: "outbox-example-inventory-relay", DefaultTopic: cmp.Or(cfg.Inventory.Topic, events.TopicInventory), Logger: log}
	ob, err := d.Outbox(ctx, cmp.Or(cfg.OutboxSchema, pgstore.DefaultSchema), sink, log)
	if err != nil {
		return fmt.Errorf("inventory: %w", err)
	}
	newInventory := New
	if d.SQLite() {
		newInventory = NewSQLite
	}
	inv, err := newInventory(d.DB, ob, cfg.Inventory)
	if err != nil {
		return err
	}
	if err := inv.Migrate(ctx); err != nil {
		return err
	}
	applier, err := d.Inbox(ctx, cmp.Or(cfg.InboxSchema, inbox.DefaultSchema), log, inv.Handle)
	if err != nil {
		return err
	}
	c := cfg.Consumer
	c.Group, c.Applier, c.ClientID, c.Logger = Group, applier, "outbox-example-"+Group, log
	if len(c.Topics) == 0 {
		c.Topics = []string{events.TopicOrders}
	}
	return process.Consume(ctx, c, cmp.Or(cfg.StatsInterval, DefaultStatsInterval), log)
}

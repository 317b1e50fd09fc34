package billing

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
)

// Defaults of [RunConfig].
const (
	// DefaultMaxConns is the default of RunConfig.MaxConns: one connection
	// per partition being handled, plus the inbox's checks.
	DefaultMaxConns = 6
	// DefaultStatsInterval is the default of RunConfig.StatsInterval.
	DefaultStatsInterval = 10 * time.Second
)

// RunConfig configures [Run]: billing as a process of its own.
type RunConfig struct {
	// DatabaseURL is the PostgreSQL database of billing's tables and its
	// inbox. Exactly one of DatabaseURL, Pool and SQLitePath is required.
	DatabaseURL string
	// Pool is an open pool of that database, used as it is; the caller
	// closes it.
	Pool *pgxpool.Pool
	// InboxSchema is the PostgreSQL schema of the inbox. Defaults to
	// "inbox".
	InboxSchema string
	// SQLitePath is a SQLite file that holds billing's tables and its
	// inbox, created if missing.
	SQLitePath string
	// MaxConns bounds the pool Run opens from DatabaseURL. Defaults to 6.
	MaxConns int32
	// Billing configures billing (its schema and logger).
	Billing Config
	// Consumer configures the consumer group: Brokers (required),
	// Security, Topics (defaults to the orders topic), and the retry,
	// timeout and membership settings. Run sets Group, Applier, ClientID,
	// Hooks and Logger (Billing.Logger).
	Consumer consumer.Config
	// StatsInterval is how often the counts of processed, duplicate and
	// parked events are logged (when they changed). Defaults to 10s.
	StatsInterval time.Duration
}

func (c RunConfig) where() process.Where {
	return process.Where{DatabaseURL: c.DatabaseURL, Pool: c.Pool, SQLitePath: c.SQLitePath}
}

// Run runs billing until ctx ends: it opens the database, creates
// billing's tables and the inbox's if they are missing, and applies the
// order events of its consumer group (Group) through the inbox, once each.
// It returns nil when ctx ends. An error of billing's configuration wraps
// [ErrInvalidConfig], of the inbox's inbox.ErrInvalidConfig, of the
// consumer's consumer.ErrInvalidConfig; each names the field.
func Run(ctx context.Context, cfg RunConfig) error {
	if err := cfg.where().Check(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	log := cmp.Or(cfg.Billing.Logger, slog.Default())
	d, err := process.Open(ctx, cfg.where(), "billing", cmp.Or(cfg.MaxConns, DefaultMaxConns))
	if err != nil {
		return fmt.Errorf("billing: %w", err)
	}
	defer d.Close()
	newBilling := New
	if d.SQLite() {
		newBilling = NewSQLite
	}
	b, err := newBilling(d.DB, cfg.Billing)
	if err != nil {
		return err
	}
	if err := b.Migrate(ctx); err != nil {
		return err
	}
	applier, err := d.Inbox(ctx, cmp.Or(cfg.InboxSchema, inbox.DefaultSchema), log, b.Handle)
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

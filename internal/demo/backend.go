package demo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/consumer"
	"github.com/outbox-dev/outbox/examples/orders/billing"
	"github.com/outbox-dev/outbox/examples/orders/inventory"
	"github.com/outbox-dev/outbox/examples/orders/orderservice"
	"github.com/outbox-dev/outbox/inbox"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
	"github.com/outbox-dev/outbox/store/sqlitestore"
)

// outboxStore is what the demo needs of an outbox: the relay's queue and
// the counts by status.
type outboxStore interface {
	store.Queue
	Counts(ctx context.Context) (map[outbox.Status]int64, error)
}

// backend is the services on their databases, whichever the databases are.
type backend struct {
	// name says what runs where, for the summary.
	name string
	// ordersOutbox and inventoryOutbox are the two outboxes, each relayed
	// by a relay of its own.
	ordersOutbox, inventoryOutbox outboxStore
	orders                        *orderservice.Service
	billing                       *billing.Billing
	inventory                     *inventory.Inventory
	// billingApplier and inventoryApplier are the inboxes with the
	// services' handlers bound, for the consumer runners.
	billingApplier, inventoryApplier consumer.Applier
	// sqlite is true on SQLite, whose relays poll (no LISTEN/NOTIFY).
	sqlite bool
	close  func()
}

// demoStock is the inventory's stock at start: plenty of most SKUs, and
// LAMP-1 scarce, so that some orders are rejected by the inventory.
func demoStock() map[string]int64 {
	return map[string]int64{"BOOK-1": 1_000_000, "MUG-1": 1_000_000, "PEN-1": 1_000_000, "LAMP-1": 20}
}

// openSQLite opens the three SQLite databases in dir and migrates them.
func openSQLite(ctx context.Context, dir string, log *slog.Logger) (*backend, error) {
	var dbs []*sql.DB
	closeAll := func() {
		for _, db := range dbs {
			db.Close()
		}
	}
	open := func(name string) (*sql.DB, error) {
		db, err := sqlitestore.Open(ctx, filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		dbs = append(dbs, db)
		return db, nil
	}
	b, err := func() (_ *backend, err error) {
		var ordersDB, billingDB, inventoryDB *sql.DB
		for _, f := range []struct {
			db   **sql.DB
			name string
		}{{&ordersDB, "orders.db"}, {&billingDB, "billing.db"}, {&inventoryDB, "inventory.db"}} {
			if *f.db, err = open(f.name); err != nil {
				return nil, err
			}
		}
		ordersOutbox, err1 := sqlitestore.New(ordersDB, sqlitestore.Config{Logger: log})
		inventoryOutbox, err2 := sqlitestore.New(inventoryDB, sqlitestore.Config{Logger: log})
		svc, err3 := orderservice.NewSQLite(ordersDB, ordersOutbox, orderservice.Config{Topic: TopicOrders, Logger: log})
		bill, err4 := billing.NewSQLite(billingDB, billing.Config{Logger: log})
		inv, err5 := inventory.NewSQLite(inventoryDB, inventoryOutbox, inventory.Config{Topic: TopicInventory, Stock: demoStock(), Logger: log})
		billingInbox, err6 := inbox.NewSQLite(billingDB, inbox.SQLiteConfig{Logger: log})
		inventoryInbox, err7 := inbox.NewSQLite(inventoryDB, inbox.SQLiteConfig{Logger: log})
		if err := errors.Join(err1, err2, err3, err4, err5, err6, err7); err != nil {
			return nil, err
		}
		if err := migrate(ctx, ordersOutbox.Migrate, inventoryOutbox.Migrate, svc.Migrate, bill.Migrate, inv.Migrate,
			billingInbox.Migrate, inventoryInbox.Migrate); err != nil {
			return nil, err
		}
		return &backend{
			name:         "SQLite (" + dir + ")",
			ordersOutbox: ordersOutbox, inventoryOutbox: inventoryOutbox,
			orders: svc, billing: bill, inventory: inv,
			billingApplier: billingInbox.Bind(bill.Handle), inventoryApplier: inventoryInbox.Bind(inv.Handle),
			sqlite: true, close: closeAll,
		}, nil
	}()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("demo: SQLite databases in %s: %w", dir, err)
	}
	return b, nil
}

// openPostgres opens the PostgreSQL database at url and migrates the
// services' schemas: <prefix>_orders (orders and the order service's
// outbox), <prefix>_billing (invoices and billing's inbox) and
// <prefix>_inventory (stock, reservations, the inventory's inbox and
// outbox): one schema per service, as one SQLite file per service.
func openPostgres(ctx context.Context, url, prefix string, log *slog.Logger) (*backend, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("%w: DatabaseURL is not a valid PostgreSQL URL or key=value DSN", ErrInvalidConfig)
	}
	cfg.MaxConns = 20
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("demo: connect to PostgreSQL: %w", err)
	}
	b, err := func() (*backend, error) {
		if err := pool.Ping(ctx); err != nil {
			return nil, err
		}
		ordersSchema, billingSchema, inventorySchema := prefix+"_orders", prefix+"_billing", prefix+"_inventory"
		// The services run on database/sql over the pool (pgx's stdlib
		// driver), as on SQLite; the outboxes enqueue through SQL().
		db := stdlib.OpenDBFromPool(pool)
		ordersOutbox, err1 := pgstore.New(pool, pgstore.Config{Schema: ordersSchema, Logger: log})
		inventoryOutbox, err2 := pgstore.New(pool, pgstore.Config{Schema: inventorySchema, Logger: log})
		billingInbox, err3 := inbox.New(pool, inbox.Config{Schema: billingSchema, Logger: log})
		inventoryInbox, err4 := inbox.New(pool, inbox.Config{Schema: inventorySchema, Logger: log})
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			return nil, err
		}
		svc, err5 := orderservice.New(db, ordersOutbox.SQL(), orderservice.Config{Schema: ordersSchema, Topic: TopicOrders, Logger: log})
		bill, err6 := billing.New(db, billing.Config{Schema: billingSchema, Logger: log})
		inv, err7 := inventory.New(db, inventoryOutbox.SQL(), inventory.Config{Schema: inventorySchema, Topic: TopicInventory,
			Stock: demoStock(), Logger: log})
		if err := errors.Join(err5, err6, err7); err != nil {
			return nil, err
		}
		if err := migrate(ctx, ordersOutbox.Migrate, inventoryOutbox.Migrate, svc.Migrate, bill.Migrate, inv.Migrate,
			billingInbox.Migrate, inventoryInbox.Migrate); err != nil {
			return nil, err
		}
		return &backend{
			name:         fmt.Sprintf("PostgreSQL (schemas %s, %s, %s)", ordersSchema, billingSchema, inventorySchema),
			ordersOutbox: ordersOutbox, inventoryOutbox: inventoryOutbox,
			orders: svc, billing: bill, inventory: inv,
			billingApplier: billingInbox.SQL().Bind(bill.Handle), inventoryApplier: inventoryInbox.SQL().Bind(inv.Handle),
			close: func() { db.Close(); pool.Close() },
		}, nil
	}()
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("demo: PostgreSQL: %w", err)
	}
	return b, nil
}

// migrate applies the migrations in order.
func migrate(ctx context.Context, fns ...func(context.Context) error) error {
	for _, m := range fns {
		if err := m(ctx); err != nil {
			return err
		}
	}
	return nil
}

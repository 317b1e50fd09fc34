// Package inventory is the inventory consumer of the reference order system
// (consumer group "inventory-service"): it reserves an
// order's items once, however often its OrderPlaced arrives, releases the
// reservation when the order is cancelled, and settles it when the order
// ships.
//
// When an order asks for an unknown SKU or more than is available, the
// inventory reserves none of its items and publishes StockRejected
// instead: through its own outbox, in the same transaction as the
// rejected reservation and the inbox record, so the rejection is as
// reliable as any order event and a bad order never turns into a crash
// loop. A successful reservation publishes StockReserved the same way,
// and a release StockReleased. These events have aggregate Reservation
// (key: the order id) and go to Config.Topic ("inventory").
//
// [Inventory.Handle] is an [inbox.SQLHandlerFunc], the same on PostgreSQL
// and SQLite; run it through the inbox (the consumer runner does). It
// enqueues its events with an outbox.Enqueuer[*sql.Tx] (the PostgreSQL
// store's SQL(), or a *sqlitestore.Store) in the inbox's transaction. What
// differs between the databases is in the SQL files only: sql/ for
// PostgreSQL, sql/sqlite/ for SQLite.
//
//	inb, err := inbox.New(pool, inbox.Config{})
//	...
//	inv, err := inventory.New(inb.SQL().DB(), store.SQL(), inventory.Config{})
//	...
//	err = inv.Migrate(ctx) // the inventory tables and their stock, if missing
//	r, err := consumer.New(consumer.Config{Group: inventory.Group, Topics: []string{"orders"},
//		Applier: inb.SQL().Bind(inv.Handle), ...})
package inventory

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/examples/orders/events"
	"github.com/outbox-dev/outbox/examples/orders/internal/pgschema"
	"github.com/outbox-dev/outbox/examples/orders/internal/sqlfiles"
	"github.com/outbox-dev/outbox/inbox"
)

const (
	// Group is the inventory's Kafka consumer group and inbox consumer
	// name.
	Group = "inventory-service"
	// DefaultSchema is the default of Config.Schema.
	DefaultSchema = "inventory"
)

// DefaultStock is the default of Config.Stock: a few SKUs with plenty of
// stock, and LAMP-1 with little, to see a StockRejected.
func DefaultStock() map[string]int64 {
	return map[string]int64{"BOOK-1": 1_000_000, "MUG-1": 1_000_000, "PEN-1": 1_000_000, "LAMP-1": 5}
}

var (
	// ErrInvalidConfig is wrapped by New's error for a Config it cannot
	// use; the message names the field.
	ErrInvalidConfig = errors.New("inventory: invalid config")
	// ErrNotFound: no reservation for the order, or no such SKU.
	ErrNotFound = errors.New("inventory: not found")
)

// Reservation statuses.
const (
	StatusReserved = "RESERVED"
	StatusRejected = "REJECTED"
	StatusReleased = "RELEASED"
	StatusShipped  = "SHIPPED"
)

// Config configures an [Inventory].
type Config struct {
	// Schema holds the inventory's tables (stock, reservations) on
	// PostgreSQL. It must match ^[a-z_][a-z0-9_]{0,62}$. Defaults to
	// "inventory". On SQLite the tables are the database file's own, and
	// Schema is not used.
	Schema string
	// Topic is the topic of the inventory's events. Defaults to
	// events.TopicInventory ("inventory").
	Topic string
	// Stock is the stock Migrate gives SKUs that have none yet, as SKU ->
	// units (existing SKUs are left alone). Defaults to DefaultStock().
	Stock map[string]int64
	// Logger receives a line per reservation, rejection and release, with
	// the order and message ids. Defaults to slog.Default().
	Logger *slog.Logger
}

// Inventory applies order events to stock. It is safe for concurrent use.
type Inventory struct {
	db      *sql.DB
	dialect sqlfiles.Dialect
	// outbox enqueues StockReserved, StockRejected and StockReleased in the
	// handler's transaction.
	outbox outbox.Enqueuer[*sql.Tx]
	cfg    Config
	q      struct {
		schema, seed, claim, lockStock, moveStock, lockReservation, getReservation, updateReservation, getStock string
	}
}

// Reservation is what the inventory did for one order.
type Reservation struct {
	OrderID string
	// Status is RESERVED, REJECTED, RELEASED or SHIPPED.
	Status string
	Items  []events.Item
	// Rejected are the lines that could not be reserved.
	Rejected []events.RejectedLine
	// EventID is the OrderPlaced that made it.
	EventID   uuid.UUID
	CreatedAt time.Time
	UpdatedAt time.Time
}

// sqlFiles are the inventory's SQL texts: PostgreSQL's in sql/, SQLite's
// in sql/sqlite/.
//
//go:embed sql
var sqlFiles embed.FS

// New returns the inventory on PostgreSQL: db is the database of its
// tables, its inbox and its outbox ob, opened with pgx's stdlib driver (the
// inbox's SQL().DB(), or stdlib.OpenDBFromPool(pool)); ob is the outbox
// store's SQL(). Run [Inventory.Handle] through the inbox's SQL() face. It
// does not touch the database; call [Inventory.Migrate] to create and seed
// the tables.
func New(db *sql.DB, ob outbox.Enqueuer[*sql.Tx], cfg Config) (*Inventory, error) {
	return newInventory(db, sqlfiles.PostgreSQL, ob, cfg)
}

// NewSQLite returns the inventory on the SQLite database db (from
// sqlitestore.Open), which also holds its inbox and its outbox ob, a
// *sqlitestore.Store on db; run [Inventory.Handle] through the SQLite
// inbox. Config.Schema is not used. It does not touch the database; call
// [Inventory.Migrate] to create and seed the tables (and ob's Migrate for
// the outbox's).
func NewSQLite(db *sql.DB, ob outbox.Enqueuer[*sql.Tx], cfg Config) (*Inventory, error) {
	return newInventory(db, sqlfiles.SQLite, ob, cfg)
}

func newInventory(db *sql.DB, d sqlfiles.Dialect, ob outbox.Enqueuer[*sql.Tx], cfg Config) (*Inventory, error) {
	switch {
	case db == nil:
		return nil, fmt.Errorf("%w: db is nil", ErrInvalidConfig)
	case ob == nil:
		return nil, fmt.Errorf("%w: the outbox is required", ErrInvalidConfig)
	}
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
	}
	if cfg.Schema == "" {
		cfg.Schema = DefaultSchema
	}
	if cfg.Topic == "" {
		cfg.Topic = events.TopicInventory
	}
	if cfg.Stock == nil {
		cfg.Stock = DefaultStock()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := pgschema.Check(cfg.Schema); err != nil {
		return nil, bad("Schema", "%v", err)
	}
	if err := outbox.Validate(outbox.Limits{}, outbox.Message{AggregateType: "x", AggregateID: "x", EventType: "x", Topic: cfg.Topic, Payload: []byte("{}")}); err != nil {
		return nil, bad("Topic", "%q is not a valid Kafka topic name", cfg.Topic)
	}
	for sku, n := range cfg.Stock {
		if !events.ValidSKU(sku) || n < 0 {
			return nil, bad("Stock", "%q: %d must be a SKU of 1-64 letters, digits, '.', '_' or '-' and a quantity of 0 or more", sku, n)
		}
	}
	inv := &Inventory{db: db, dialect: d, outbox: ob, cfg: cfg}
	err := sqlfiles.Load(sqlFiles, d, cfg.Schema, map[*string]string{
		&inv.q.schema: "schema.sql", &inv.q.seed: "seed_stock.sql", &inv.q.claim: "claim_reservation.sql",
		&inv.q.lockStock: "lock_stock.sql", &inv.q.moveStock: "move_stock.sql",
		&inv.q.lockReservation: "lock_reservation.sql", &inv.q.getReservation: "get_reservation.sql",
		&inv.q.updateReservation: "update_reservation.sql", &inv.q.getStock: "get_stock.sql",
	})
	if err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	return inv, nil
}

// Schema returns the schema of the inventory's tables.
func (inv *Inventory) Schema() string { return inv.cfg.Schema }

// Migrate creates the inventory's schema and tables if they are missing
// and gives the SKUs of Config.Stock that have no stock row theirs. It is
// idempotent and safe when several instances start at once.
func (inv *Inventory) Migrate(ctx context.Context) error {
	if err := sqlfiles.Migrate(ctx, inv.db, inv.dialect, "inventory", inv.cfg.Schema, inv.q.schema); err != nil {
		return fmt.Errorf("inventory: migrate: %w", err)
	}
	stock, err := json.Marshal(inv.cfg.Stock) // {"BOOK-1": 100, ...}
	if err != nil {
		return fmt.Errorf("inventory: encode stock: %w", err)
	}
	if _, err := inv.db.ExecContext(ctx, inv.q.seed, string(stock)); err != nil {
		return fmt.Errorf("inventory: seed stock: %w", err)
	}
	return nil
}

// Handle applies one delivered event in tx, the inbox's transaction (an
// [inbox.SQLHandlerFunc], on PostgreSQL and SQLite alike):
//
//   - OrderPlaced (v1 or v2): reserves all of the order's items, or none
//     and publishes StockRejected naming the unknown SKUs and those short
//     of stock. An order without items reserves nothing. An order that
//     has a reservation already is left alone.
//   - OrderCancelled: a RESERVED reservation is released (StockReleased).
//   - OrderShipped: a RESERVED reservation's units leave the stock.
//
// Other event types are skipped. An unknown version or a broken payload
// gives an error wrapping inbox.ErrPermanent (park it).
func (inv *Inventory) Handle(ctx context.Context, tx *sql.Tx, msg inbox.Message) error {
	ev, err := events.Decode(msg)
	if errors.Is(err, events.ErrUnknownEventType) {
		inv.cfg.Logger.Debug("inventory: skipping an event type it does not use", slog.String("event_type", msg.EventType),
			slog.String("message_id", msg.ID.String()))
		return nil
	}
	if err != nil {
		return err
	}
	log := inv.cfg.Logger.With(slog.String("order_id", msg.AggregateID), slog.String("message_id", msg.ID.String()))
	switch e := ev.(type) {
	case events.OrderPlaced:
		return inv.reserve(ctx, tx, log, msg, e)
	case events.OrderCancelled:
		return inv.settle(ctx, tx, log, msg, e.OrderID, StatusReleased)
	case events.OrderShipped:
		return inv.settle(ctx, tx, log, msg, e.OrderID, StatusShipped)
	}
	return nil
}

func (inv *Inventory) reserve(ctx context.Context, tx *sql.Tx, log *slog.Logger, msg inbox.Message, e events.OrderPlaced) error {
	if len(e.Items) == 0 {
		log.Info("inventory: order has no items; nothing to reserve")
		return nil
	}
	// The items as a JSON array, [{"sku": "BOOK-1", "quantity": 2}, ...]:
	// the reservation keeps it, and the stock queries read it as rows
	// (jsonb_to_recordset on PostgreSQL, json_each on SQLite).
	itemsJSON, err := json.Marshal(e.Items)
	if err != nil {
		return fmt.Errorf("inventory: encode items: %w", err)
	}
	res, err := tx.ExecContext(ctx, inv.q.claim, e.OrderID, itemsJSON, msg.ID)
	var claimed int64
	if err == nil {
		claimed, err = res.RowsAffected()
	}
	if err != nil {
		return fmt.Errorf("inventory: insert reservation of order %s: %w", e.OrderID, err)
	}
	if claimed == 0 {
		log.Info("inventory: order has a reservation already; OrderPlaced ignored")
		return nil
	}
	available, err := inv.lockStock(ctx, tx, itemsJSON)
	if err != nil {
		return fmt.Errorf("inventory: lock stock: %w", err)
	}
	var rejected []events.RejectedLine
	for _, it := range e.Items {
		have, known := available[it.SKU]
		switch {
		case !known:
			rejected = append(rejected, events.RejectedLine{SKU: it.SKU, Quantity: it.Quantity, Problem: events.ProblemUnknownSKU})
		case have < int64(it.Quantity):
			rejected = append(rejected, events.RejectedLine{SKU: it.SKU, Quantity: it.Quantity, Available: have, Problem: events.ProblemInsufficientStock})
		}
	}
	now := time.Now().UTC()
	if len(rejected) > 0 {
		rejectedJSON, err := json.Marshal(rejected)
		if err != nil {
			return fmt.Errorf("inventory: encode rejected lines: %w", err)
		}
		if _, err := tx.ExecContext(ctx, inv.q.updateReservation, e.OrderID, StatusRejected, rejectedJSON); err != nil {
			return fmt.Errorf("inventory: reject reservation of order %s: %w", e.OrderID, err)
		}
		log.Warn("inventory: stock rejected", slog.Any("lines", rejected))
		return inv.publish(ctx, tx, msg, events.StockRejected{OrderID: e.OrderID, Lines: rejected, RejectedAt: now})
	}
	if err := inv.moveStock(ctx, tx, itemsJSON, -1, +1); err != nil {
		return fmt.Errorf("inventory: reserve stock of order %s: %w", e.OrderID, err)
	}
	log.Info("inventory: stock reserved", slog.Int("lines", len(e.Items)))
	return inv.publish(ctx, tx, msg, events.StockReserved{OrderID: e.OrderID, Items: e.Items, ReservedAt: now})
}

// lockStock reads, and on PostgreSQL locks, the available units of the
// SKUs of items, a JSON array of events.Item.
func (inv *Inventory) lockStock(ctx context.Context, tx *sql.Tx, items []byte) (map[string]int64, error) {
	// A JSON argument is passed as text (a string): SQLite reads a BLOB
	// given to its JSON functions as its binary JSONB format.
	rows, err := tx.QueryContext(ctx, inv.q.lockStock, string(items))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	available := map[string]int64{}
	for rows.Next() {
		var (
			sku string
			n   int64
		)
		if err := rows.Scan(&sku, &n); err != nil {
			return nil, err
		}
		available[sku] = n
	}
	return available, rows.Err()
}

// moveStock moves the quantities of items, a JSON array of events.Item,
// between available and reserved: reserve with signs (-1, +1), release
// with (+1, -1), ship with (0, -1).
func (inv *Inventory) moveStock(ctx context.Context, tx *sql.Tx, items []byte, availableSign, reservedSign int) error {
	_, err := tx.ExecContext(ctx, inv.q.moveStock, string(items), availableSign, reservedSign) // JSON as text: see lockStock
	return err
}

// settle releases (to StatusReleased) or ships (to StatusShipped) the
// order's reservation, if it is RESERVED.
func (inv *Inventory) settle(ctx context.Context, tx *sql.Tx, log *slog.Logger, msg inbox.Message, orderID, to string) error {
	r, err := scanReservation(tx.QueryRowContext(ctx, inv.q.lockReservation, orderID))
	if errors.Is(err, sql.ErrNoRows) {
		log.Info("inventory: no reservation to settle", slog.String("event_type", msg.EventType))
		return nil
	}
	if err != nil {
		return fmt.Errorf("inventory: lock reservation of order %s: %w", orderID, err)
	}
	if r.Status != StatusReserved {
		log.Info("inventory: reservation is "+r.Status+"; nothing to settle", slog.String("event_type", msg.EventType))
		return nil
	}
	itemsJSON, err := json.Marshal(r.Items)
	if err != nil {
		return fmt.Errorf("inventory: encode items: %w", err)
	}
	availableSign := 0 // shipped: the units leave the warehouse
	if to == StatusReleased {
		availableSign = +1
	}
	if err := inv.moveStock(ctx, tx, itemsJSON, availableSign, -1); err != nil {
		return fmt.Errorf("inventory: settle stock of order %s: %w", orderID, err)
	}
	if _, err := tx.ExecContext(ctx, inv.q.updateReservation, orderID, to, []byte("[]")); err != nil {
		return fmt.Errorf("inventory: settle reservation of order %s: %w", orderID, err)
	}
	log.Info("inventory: reservation " + to)
	if to != StatusReleased {
		return nil
	}
	return inv.publish(ctx, tx, msg, events.StockReleased{OrderID: orderID, Items: r.Items, ReleasedAt: time.Now().UTC()})
}

// publish enqueues e to the inventory's outbox in tx, caused by msg.
func (inv *Inventory) publish(ctx context.Context, tx *sql.Tx, cause inbox.Message, e events.Event) error {
	m, err := events.Message(e, inv.cfg.Topic)
	if err != nil {
		return fmt.Errorf("inventory: %w", err)
	}
	m.CausationID = cause.ID.String()
	if err := inv.outbox.Enqueue(ctx, tx, m); err != nil {
		return fmt.Errorf("inventory: enqueue %s: %w", e.EventType(), err)
	}
	return nil
}

// Reservation returns the order's reservation, or an error wrapping
// [ErrNotFound].
func (inv *Inventory) Reservation(ctx context.Context, orderID string) (Reservation, error) {
	r, err := scanReservation(inv.db.QueryRowContext(ctx, inv.q.getReservation, orderID))
	if errors.Is(err, sql.ErrNoRows) {
		return Reservation{}, fmt.Errorf("%w: no reservation for order %s", ErrNotFound, orderID)
	}
	if err != nil {
		return Reservation{}, fmt.Errorf("inventory: reservation of order %s: %w", orderID, err)
	}
	return r, nil
}

// Stock returns the units of sku that are available and reserved, or an
// error wrapping [ErrNotFound].
func (inv *Inventory) Stock(ctx context.Context, sku string) (available, reserved int64, err error) {
	err = inv.db.QueryRowContext(ctx, inv.q.getStock, sku).Scan(&available, &reserved)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, fmt.Errorf("%w: no SKU %q", ErrNotFound, sku)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("inventory: stock of %s: %w", sku, err)
	}
	return available, reserved, nil
}

func scanReservation(row *sql.Row) (Reservation, error) {
	var (
		r                       Reservation
		itemsJSON, rejectedJSON []byte
	)
	if err := row.Scan(&r.OrderID, &r.Status, &itemsJSON, &rejectedJSON, &r.EventID, &r.CreatedAt, &r.UpdatedAt); err != nil {
		return Reservation{}, err
	}
	if err := json.Unmarshal(itemsJSON, &r.Items); err != nil {
		return Reservation{}, fmt.Errorf("decode items of reservation %s: %w", r.OrderID, err)
	}
	if err := json.Unmarshal(rejectedJSON, &r.Rejected); err != nil {
		return Reservation{}, fmt.Errorf("decode rejected lines of reservation %s: %w", r.OrderID, err)
	}
	return r, nil
}

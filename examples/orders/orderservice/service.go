package orderservice

import (
	"context"
	"crypto/sha256"
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
	"github.com/outbox-dev/outbox/examples/orders/money"
)

// Defaults of [Config].
const (
	// DefaultSchema is the default of Config.Schema.
	DefaultSchema = "orders"
	// DefaultPlacedVersion is the default of Config.PlacedVersion.
	DefaultPlacedVersion = 2
	// DefaultMaxBodyBytes is the default of Config.MaxBodyBytes: 64 KiB.
	DefaultMaxBodyBytes = 64 << 10
)

// Sentinel errors. Callers branch on them with errors.Is.
var (
	// ErrInvalidConfig is wrapped by New's error for a Config it cannot
	// use; the message names the field.
	ErrInvalidConfig = errors.New("orderservice: invalid config")
	// ErrInvalidInput is wrapped by every *[FieldError].
	ErrInvalidInput = errors.New("orderservice: invalid input")
	// ErrNotFound: no order has the id.
	ErrNotFound = errors.New("orderservice: order not found")
	// ErrInvalidTransition is wrapped by every *[TransitionError].
	ErrInvalidTransition = errors.New("orderservice: invalid transition")
	// ErrIdempotencyKeyReused: an Idempotency-Key came again with a
	// different request than the first time.
	ErrIdempotencyKeyReused = errors.New("orderservice: idempotency key reused with a different request")
)

// FieldError names the input field at fault and the rule it breaks. It
// wraps [ErrInvalidInput].
type FieldError struct {
	// Field is spelled as in the JSON request ("amount", "items[1].sku"),
	// or is the header name ("Idempotency-Key").
	Field string
	Rule  string
}

func (e *FieldError) Error() string { return e.Field + " " + e.Rule }

// Unwrap makes errors.Is(err, ErrInvalidInput) true.
func (e *FieldError) Unwrap() error { return ErrInvalidInput }

// TransitionError is an action the order's status does not allow, such as
// shipping an order that is not paid. It wraps [ErrInvalidTransition].
type TransitionError struct {
	OrderID uuid.UUID
	Status  Status
	Action  string
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("order %s is %s and cannot be %s", e.OrderID, e.Status, pastTense[e.Action])
}

// Unwrap makes errors.Is(err, ErrInvalidTransition) true.
func (e *TransitionError) Unwrap() error { return ErrInvalidTransition }

// Status is where an order is in its lifecycle.
type Status string

// The order states. PLACED -> PAID -> SHIPPED; PLACED or PAID -> CANCELLED.
const (
	StatusPlaced    Status = "PLACED"
	StatusPaid      Status = "PAID"
	StatusShipped   Status = "SHIPPED"
	StatusCancelled Status = "CANCELLED"
)

// Item is one line of an order.
type Item struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

// PlaceOrder is a request to place an order.
type PlaceOrder struct {
	// CustomerID is required: 1-100 bytes of UTF-8 without control
	// characters or surrounding spaces.
	CustomerID string
	// Amount is a decimal string with at most two decimals, from 0.01 to
	// 999999999.99 ("150.00").
	Amount string
	// Currency is an ISO 4217 code from money.Currencies.
	Currency string
	// Items are optional, at most MaxItems, each SKU once.
	Items []Item
}

// Limits of PlaceOrder.
const (
	// MaxItems is the most lines an order may have.
	MaxItems = 100
	// MaxQuantity is the most units of one line.
	MaxQuantity = 10_000
	// MaxIdempotencyKeyLen is the longest Idempotency-Key accepted.
	MaxIdempotencyKeyLen = 255
)

// Order is an order as the service returns it (and as its JSON API
// shows it).
type Order struct {
	ID         uuid.UUID `json:"id"`
	CustomerID string    `json:"customerId"`
	// Amount is AmountMinor as a decimal string with two decimals.
	Amount      string    `json:"amount"`
	AmountMinor int64     `json:"-"`
	Currency    string    `json:"currency"`
	Items       []Item    `json:"items"`
	Status      Status    `json:"status"`
	Version     int64     `json:"version"`
	CreatedAt   time.Time `json:"createdAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
}

// Config configures a [Service].
type Config struct {
	// Schema holds the service's tables (orders, idempotency_keys) on
	// PostgreSQL. It must match ^[a-z_][a-z0-9_]{0,62}$. Defaults to
	// "orders". On SQLite the tables are the database file's own, and
	// Schema is not used.
	Schema string
	// Topic is the Kafka topic of the order events. Defaults to
	// events.TopicOrders ("orders").
	Topic string
	// PlacedVersion is the contract version of the OrderPlaced events the
	// service publishes: 2, or 1 while consumers that know only version 1
	// still run. Defaults to 2.
	PlacedVersion int
	// MaxBodyBytes bounds a request body; a larger one gets 413. Defaults
	// to 64 KiB.
	MaxBodyBytes int64
	// Logger receives errors, with the order id. Defaults to
	// slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Schema == "" {
		c.Schema = DefaultSchema
	}
	if c.Topic == "" {
		c.Topic = events.TopicOrders
	}
	if c.PlacedVersion == 0 {
		c.PlacedVersion = DefaultPlacedVersion
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
	}
	switch {
	case c.PlacedVersion != 1 && c.PlacedVersion != 2:
		return bad("PlacedVersion", "must be 1 or 2, not %d", c.PlacedVersion)
	case c.MaxBodyBytes < 0:
		return bad("MaxBodyBytes", "must not be negative, not %d", c.MaxBodyBytes)
	}
	if err := pgschema.Check(c.Schema); err != nil {
		return bad("Schema", "%v", err)
	}
	if err := outbox.Validate(outbox.Limits{}, outbox.Message{AggregateType: "x", AggregateID: "x", EventType: "x", Topic: c.Topic, Payload: []byte("{}")}); err != nil {
		return bad("Topic", "%q is not a valid Kafka topic name", c.Topic)
	}
	return nil
}

// Service is the order service. It is safe for concurrent use.
type Service struct {
	cfg     Config
	db      *sql.DB
	dialect sqlfiles.Dialect
	// outbox enqueues the order events in the transaction of the order's
	// change: the PostgreSQL store's SQL() or a *sqlitestore.Store.
	outbox outbox.Enqueuer[*sql.Tx]
	q      queries
}

type queries struct {
	schema, claimKey, getKey, insertOrder, getOrder, lockOrder, updateStatus string
}

// sqlFiles are the service's SQL texts: PostgreSQL's in sql/, SQLite's in
// sql/sqlite/.
//
//go:embed sql
var sqlFiles embed.FS

// New returns the service on PostgreSQL: db is the database of the orders,
// opened with pgx's stdlib driver (stdlib.OpenDBFromPool(pool), or
// sql.Open("pgx", url)), and ob the outbox in the same database that the
// order events are enqueued to, pgstore.Store.SQL(). It does not touch the
// database; call [Service.Migrate] to create its tables.
func New(db *sql.DB, ob outbox.Enqueuer[*sql.Tx], cfg Config) (*Service, error) {
	return newService(db, sqlfiles.PostgreSQL, ob, cfg)
}

// NewSQLite returns the service on a SQLite database: db, from
// sqlitestore.Open, holds the service's tables and its outbox ob, a
// *sqlitestore.Store on the same db. Config.Schema is not used. It does not
// touch the database; call [Service.Migrate] to create its tables (and
// ob's Migrate for the outbox's).
func NewSQLite(db *sql.DB, ob outbox.Enqueuer[*sql.Tx], cfg Config) (*Service, error) {
	return newService(db, sqlfiles.SQLite, ob, cfg)
}

func newService(db *sql.DB, d sqlfiles.Dialect, ob outbox.Enqueuer[*sql.Tx], cfg Config) (*Service, error) {
	switch {
	case db == nil:
		return nil, fmt.Errorf("%w: db is required", ErrInvalidConfig)
	case ob == nil:
		return nil, fmt.Errorf("%w: the outbox is required", ErrInvalidConfig)
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, db: db, dialect: d, outbox: ob}
	err := sqlfiles.Load(sqlFiles, d, cfg.Schema, map[*string]string{
		&s.q.schema: "schema.sql", &s.q.claimKey: "claim_idempotency_key.sql",
		&s.q.getKey: "get_idempotency_key.sql", &s.q.insertOrder: "insert_order.sql",
		&s.q.getOrder: "get_order.sql", &s.q.lockOrder: "lock_order.sql",
		&s.q.updateStatus: "update_status.sql",
	})
	if err != nil {
		return nil, fmt.Errorf("orderservice: %w", err)
	}
	return s, nil
}

// Schema returns the schema of the service's tables.
func (s *Service) Schema() string { return s.cfg.Schema }

// Migrate creates the service's schema and tables if they are missing. It
// is idempotent and safe when several instances start at once. (The outbox
// tables are the outbox's: pgstore.Store.Migrate or 'outbox migrate', or
// sqlitestore.Store.Migrate.)
func (s *Service) Migrate(ctx context.Context) error {
	if err := sqlfiles.Migrate(ctx, s.db, s.dialect, "orderservice", s.cfg.Schema, s.q.schema); err != nil {
		return fmt.Errorf("orderservice: migrate: %w", err)
	}
	return nil
}

// Place places an order: it validates req, then writes the order and its
// OrderPlaced event (aggregate Order, key the order id, version 1) to the
// outbox in one transaction. A bad request gives a *[FieldError] and
// writes nothing.
//
// With an idempotencyKey, the first successful request with that key is
// remembered: a retry with the same key and the same request returns the
// order of the first one (as it was returned then) and replayed true, and
// writes nothing; the same key with another request gives
// [ErrIdempotencyKeyReused]. Concurrent requests with one key wait for
// each other.
func (s *Service) Place(ctx context.Context, req PlaceOrder, idempotencyKey string) (order Order, replayed bool, err error) {
	amountMinor, err := checkPlaceOrder(req)
	if err != nil {
		return Order{}, false, err
	}
	if idempotencyKey != "" && !validIdempotencyKey(idempotencyKey) {
		return Order{}, false, &FieldError{Field: "Idempotency-Key",
			Rule: fmt.Sprintf("must be 1-%d visible ASCII characters", MaxIdempotencyKeyLen)}
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Order{}, false, fmt.Errorf("orderservice: new order id: %w", err)
	}
	now := s.now()
	items := req.Items
	if items == nil {
		items = []Item{}
	}
	order = Order{
		ID: id, CustomerID: req.CustomerID, Amount: money.FormatAmount(amountMinor), AmountMinor: amountMinor,
		Currency: req.Currency, Items: items, Status: StatusPlaced, Version: 1, CreatedAt: now, UpdatedAt: now,
	}
	msg, err := events.Message(s.placedEvent(order), s.cfg.Topic)
	if err != nil {
		return Order{}, false, fmt.Errorf("orderservice: order %s: %w", id, err)
	}
	if msg.ID, err = uuid.NewV7(); err != nil {
		return Order{}, false, fmt.Errorf("orderservice: new message id: %w", err)
	}
	itemsJSON, err := json.Marshal(items)
	if err != nil {
		return Order{}, false, fmt.Errorf("orderservice: encode items: %w", err)
	}

	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if idempotencyKey != "" {
			first, found, err := s.claimIdempotencyKey(ctx, tx, idempotencyKey, req, amountMinor, order)
			if err != nil || found {
				order, replayed = first, found
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, s.q.insertOrder, order.ID, order.CustomerID, order.AmountMinor, order.Currency,
			itemsJSON, order.Status, order.Version, order.CreatedAt, order.UpdatedAt); err != nil {
			return fmt.Errorf("insert order: %w", err)
		}
		return s.outbox.Enqueue(ctx, tx, msg)
	})
	if err != nil {
		if errors.Is(err, ErrIdempotencyKeyReused) {
			return Order{}, false, err
		}
		return Order{}, false, fmt.Errorf("orderservice: place order %s: %w", id, err)
	}
	if !replayed {
		s.cfg.Logger.Info("order placed", slog.String("order_id", order.ID.String()),
			slog.String("message_id", msg.ID.String()), slog.Int("event_version", msg.EventVersion))
	}
	return order, replayed, nil
}

// claimIdempotencyKey records key for order in tx. If the key was recorded
// before, it returns the first response and found true, or
// ErrIdempotencyKeyReused when that was for another request.
func (s *Service) claimIdempotencyKey(ctx context.Context, tx *sql.Tx, key string, req PlaceOrder, amountMinor int64, order Order) (Order, bool, error) {
	hash := requestHash(req, amountMinor)
	response, err := json.Marshal(order)
	if err != nil {
		return Order{}, false, fmt.Errorf("encode response: %w", err)
	}
	res, err := tx.ExecContext(ctx, s.q.claimKey, key, hash, order.ID, response)
	if err != nil {
		return Order{}, false, fmt.Errorf("record idempotency key: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return Order{}, false, err
	}
	var firstHash, firstResponse []byte
	if err := tx.QueryRowContext(ctx, s.q.getKey, key).Scan(&firstHash, &firstResponse); err != nil {
		return Order{}, false, fmt.Errorf("read idempotency key: %w", err)
	}
	if string(firstHash) != string(hash) {
		return Order{}, false, ErrIdempotencyKeyReused
	}
	var first Order
	if err := json.Unmarshal(firstResponse, &first); err != nil {
		return Order{}, false, fmt.Errorf("decode the first response: %w", err)
	}
	first.AmountMinor, _ = money.ParseAmount(first.Amount)
	return first, true, nil
}

// requestHash identifies a request by its meaning, so that a retry that
// spells the amount "150" instead of "150.00" is the same request.
func requestHash(req PlaceOrder, amountMinor int64) []byte {
	b, _ := json.Marshal(struct {
		CustomerID  string `json:"c"`
		AmountMinor int64  `json:"a"`
		Currency    string `json:"cu"`
		Items       []Item `json:"i"`
	}{req.CustomerID, amountMinor, req.Currency, req.Items})
	sum := sha256.Sum256(b)
	return sum[:]
}

// placedEvent is the OrderPlaced event of a new order, in the configured
// contract version.
func (s *Service) placedEvent(o Order) events.Event {
	items := make([]events.Item, len(o.Items))
	for i, it := range o.Items {
		items[i] = events.Item{SKU: it.SKU, Quantity: it.Quantity}
	}
	if s.cfg.PlacedVersion == 1 {
		return events.OrderPlacedV1{OrderID: o.ID.String(), CustomerID: o.CustomerID, Amount: o.Amount,
			Currency: o.Currency, Items: items, Version: o.Version, PlacedAt: o.CreatedAt}
	}
	return events.OrderPlaced{OrderID: o.ID.String(), CustomerID: o.CustomerID,
		Total: events.Money{AmountMinor: o.AmountMinor, Currency: o.Currency},
		Items: items, Version: o.Version, PlacedAt: o.CreatedAt}
}

// Get returns the order with id, or an error wrapping [ErrNotFound].
func (s *Service) Get(ctx context.Context, id uuid.UUID) (Order, error) {
	o, err := scanOrder(s.db.QueryRowContext(ctx, s.q.getOrder, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Order{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return Order{}, fmt.Errorf("orderservice: get order %s: %w", id, err)
	}
	return o, nil
}

// The actions of the lifecycle.
const (
	actionPay    = "pay"
	actionShip   = "ship"
	actionCancel = "cancel"
)

var pastTense = map[string]string{actionPay: "paid", actionShip: "shipped", actionCancel: "cancelled"}

// transitions says, per action, from which states it is allowed and to
// which state it leads.
var transitions = map[string]struct {
	from []Status
	to   Status
}{
	actionPay:    {from: []Status{StatusPlaced}, to: StatusPaid},
	actionShip:   {from: []Status{StatusPaid}, to: StatusShipped},
	actionCancel: {from: []Status{StatusPlaced, StatusPaid}, to: StatusCancelled},
}

// Pay moves a PLACED order to PAID and publishes OrderPaid.
func (s *Service) Pay(ctx context.Context, id uuid.UUID) (Order, error) {
	return s.transition(ctx, id, actionPay)
}

// Ship moves a PAID order to SHIPPED and publishes OrderShipped.
func (s *Service) Ship(ctx context.Context, id uuid.UUID) (Order, error) {
	return s.transition(ctx, id, actionShip)
}

// Cancel moves a PLACED or PAID order to CANCELLED and publishes
// OrderCancelled, which names the status it was cancelled in.
func (s *Service) Cancel(ctx context.Context, id uuid.UUID) (Order, error) {
	return s.transition(ctx, id, actionCancel)
}

// transition applies action to the order in one transaction: it locks the
// order's row, checks the action is allowed, updates status and version,
// and enqueues the action's event with the new version. The row lock
// serialises concurrent actions on one order, so its events enter the
// outbox in the order of their versions. A disallowed action gives a
// *[TransitionError]; an unknown order [ErrNotFound].
func (s *Service) transition(ctx context.Context, id uuid.UUID, action string) (Order, error) {
	var (
		order Order
		msgID uuid.UUID
	)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		o, err := scanOrder(tx.QueryRowContext(ctx, s.q.lockOrder, id))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		if err != nil {
			return fmt.Errorf("lock order: %w", err)
		}
		t := transitions[action]
		if !allowed(o.Status, t.from) {
			return &TransitionError{OrderID: id, Status: o.Status, Action: action}
		}
		previous := o.Status
		o.Status, o.Version, o.UpdatedAt = t.to, o.Version+1, s.now()
		if _, err := tx.ExecContext(ctx, s.q.updateStatus, o.ID, o.Status, o.Version, o.UpdatedAt); err != nil {
			return fmt.Errorf("update order: %w", err)
		}
		msg, err := events.Message(transitionEvent(o, action, previous), s.cfg.Topic)
		if err != nil {
			return err
		}
		msg.ID, err = uuid.NewV7()
		if err != nil {
			return fmt.Errorf("new message id: %w", err)
		}
		if err := s.outbox.Enqueue(ctx, tx, msg); err != nil {
			return err
		}
		order, msgID = o, msg.ID
		return nil
	})
	switch {
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrInvalidTransition):
		return Order{}, err
	case err != nil:
		return Order{}, fmt.Errorf("orderservice: %s order %s: %w", action, id, err)
	}
	s.cfg.Logger.Info("order "+pastTense[action], slog.String("order_id", id.String()),
		slog.String("message_id", msgID.String()), slog.Int64("version", order.Version))
	return order, nil
}

func allowed(st Status, from []Status) bool {
	for _, f := range from {
		if st == f {
			return true
		}
	}
	return false
}

// transitionEvent is the event an action publishes for the order o, which
// has its new status and version.
func transitionEvent(o Order, action string, previous Status) events.Event {
	id := o.ID.String()
	switch action {
	case actionPay:
		return events.OrderPaid{OrderID: id, Version: o.Version, PaidAt: o.UpdatedAt}
	case actionShip:
		return events.OrderShipped{OrderID: id, Version: o.Version, ShippedAt: o.UpdatedAt}
	default:
		return events.OrderCancelled{OrderID: id, Version: o.Version, PreviousStatus: string(previous), CancelledAt: o.UpdatedAt}
	}
}

// inTx runs fn in a transaction of s.db that commits if fn returns nil and
// rolls back otherwise. On SQLite it is a write transaction that holds the
// database's write lock from its start (sqlitestore.Open), which
// serialises it with every other writer: what FOR UPDATE does on
// PostgreSQL.
func (s *Service) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// now is the time of a change as the database stores it: UTC, whole
// microseconds (PostgreSQL's precision), so that what Place returns equals
// what Get reads back.
func (s *Service) now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func scanOrder(row *sql.Row) (Order, error) {
	var (
		o         Order
		itemsJSON []byte
	)
	if err := row.Scan(&o.ID, &o.CustomerID, &o.AmountMinor, &o.Currency, &itemsJSON, &o.Status, &o.Version,
		&o.CreatedAt, &o.UpdatedAt); err != nil {
		return Order{}, err
	}
	if err := json.Unmarshal(itemsJSON, &o.Items); err != nil {
		return Order{}, fmt.Errorf("decode items of order %s: %w", o.ID, err)
	}
	o.Amount = money.FormatAmount(o.AmountMinor)
	o.CreatedAt, o.UpdatedAt = o.CreatedAt.UTC(), o.UpdatedAt.UTC()
	return o, nil
}

// Package billing is the billing consumer of the reference order system
// (consumer group "billing"): one invoice per order, however often its
// OrderPlaced arrives, and a credit note when a paid order is cancelled.
//
// [Billing.Handle] is an [inbox.SQLHandlerFunc], the same on PostgreSQL
// and SQLite: run it through the inbox (the consumer runner does), which
// records the event id in the same transaction as the invoice, so a
// redelivered event changes nothing. The invoices table's unique order id
// backs that up for an OrderPlaced that was published twice under
// different ids. What differs between the databases is in the SQL files
// only: sql/ for PostgreSQL, sql/sqlite/ for SQLite.
//
//	inb, err := inbox.New(pool, inbox.Config{})
//	...
//	b, err := billing.New(inb.SQL().DB(), billing.Config{})
//	...
//	err = b.Migrate(ctx) // the billing tables, if missing
//	r, err := consumer.New(consumer.Config{Group: billing.Group, Topics: []string{"orders"},
//		Applier: inb.SQL().Bind(b.Handle), ...})
package billing

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox/examples/orders/events"
	"github.com/outbox-dev/outbox/examples/orders/internal/pgschema"
	"github.com/outbox-dev/outbox/examples/orders/internal/sqlfiles"
	"github.com/outbox-dev/outbox/inbox"
)

const (
	// Group is billing's Kafka consumer group and inbox consumer name.
	Group = "billing"
	// DefaultSchema is the default of Config.Schema.
	DefaultSchema = "billing"
)

var (
	// ErrInvalidConfig is wrapped by New's error for a Config it cannot
	// use; the message names the field.
	ErrInvalidConfig = errors.New("billing: invalid config")
	// ErrNotFound: the order has no invoice, or no credit note.
	ErrNotFound = errors.New("billing: not found")
	// ErrOutOfOrder is wrapped by Handle's error for an event that needs an
	// earlier one of its order that billing has not applied (an OrderPaid
	// before its OrderPlaced). It is not permanent: the runner retries it,
	// and parks it after its attempts if the earlier event never comes.
	ErrOutOfOrder = errors.New("billing: event before the one it follows")
)

// Invoice statuses.
const (
	StatusOpen     = "OPEN"
	StatusPaid     = "PAID"
	StatusVoid     = "VOID"
	StatusCredited = "CREDITED"
)

// Config configures [Billing].
type Config struct {
	// Schema holds billing's tables (invoices, credit_notes) on PostgreSQL.
	// It must match ^[a-z_][a-z0-9_]{0,62}$. Defaults to "billing". On
	// SQLite the tables are the database file's own, and Schema is not
	// used.
	Schema string
	// Logger receives a line per invoice and credit note, with the order
	// and message ids. Defaults to slog.Default().
	Logger *slog.Logger
}

// Billing applies order events to invoices. It is safe for concurrent use.
type Billing struct {
	db      *sql.DB
	dialect sqlfiles.Dialect
	cfg     Config
	q       struct{ schema, insertInvoice, lockInvoice, getInvoice, updateInvoice, insertCreditNote, getCreditNote string }
}

// Invoice is an order's invoice.
type Invoice struct {
	ID          uuid.UUID
	OrderID     string
	CustomerID  string
	AmountMinor int64
	Currency    string
	// Status is OPEN, PAID, VOID or CREDITED.
	Status string
	// OrderVersion is the version of the last order event applied.
	OrderVersion int64
	// EventID is the OrderPlaced that created the invoice.
	EventID   uuid.UUID
	CreatedAt time.Time
	// PaidAt is zero until the order is paid.
	PaidAt time.Time
}

// CreditNote refunds a paid order that was cancelled.
type CreditNote struct {
	ID          uuid.UUID
	OrderID     string
	InvoiceID   uuid.UUID
	AmountMinor int64
	Currency    string
	// EventID is the OrderCancelled that caused it.
	EventID   uuid.UUID
	CreatedAt time.Time
}

// sqlFiles are billing's SQL texts: PostgreSQL's in sql/, SQLite's in
// sql/sqlite/.
//
//go:embed sql
var sqlFiles embed.FS

// New returns billing on PostgreSQL: db is the database of its tables and
// its inbox, opened with pgx's stdlib driver (the inbox's SQL().DB(), or
// stdlib.OpenDBFromPool(pool)); run [Billing.Handle] through the inbox's
// SQL() face. It does not touch the database; call [Billing.Migrate] to
// create the tables.
func New(db *sql.DB, cfg Config) (*Billing, error) {
	return newBilling(db, sqlfiles.PostgreSQL, cfg)
}

// NewSQLite returns billing on the SQLite database db (from
// sqlitestore.Open), which also holds its inbox; run [Billing.Handle]
// through the SQLite inbox. Config.Schema is not used. It does not touch
// the database; call [Billing.Migrate] to create the tables.
func NewSQLite(db *sql.DB, cfg Config) (*Billing, error) {
	return newBilling(db, sqlfiles.SQLite, cfg)
}

func newBilling(db *sql.DB, d sqlfiles.Dialect, cfg Config) (*Billing, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: db is nil", ErrInvalidConfig)
	}
	if cfg.Schema == "" {
		cfg.Schema = DefaultSchema
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := pgschema.Check(cfg.Schema); err != nil {
		return nil, fmt.Errorf("%w: Schema: %v", ErrInvalidConfig, err)
	}
	b := &Billing{db: db, dialect: d, cfg: cfg}
	err := sqlfiles.Load(sqlFiles, d, cfg.Schema, map[*string]string{
		&b.q.schema: "schema.sql", &b.q.insertInvoice: "insert_invoice.sql", &b.q.lockInvoice: "lock_invoice.sql",
		&b.q.getInvoice: "get_invoice.sql", &b.q.updateInvoice: "update_invoice.sql",
		&b.q.insertCreditNote: "insert_credit_note.sql", &b.q.getCreditNote: "get_credit_note.sql",
	})
	if err != nil {
		return nil, fmt.Errorf("billing: %w", err)
	}
	return b, nil
}

// Schema returns the schema of billing's tables.
func (b *Billing) Schema() string { return b.cfg.Schema }

// Migrate creates billing's schema and tables if they are missing. It is
// idempotent and safe when several instances start at once.
func (b *Billing) Migrate(ctx context.Context) error {
	if err := sqlfiles.Migrate(ctx, b.db, b.dialect, "billing", b.cfg.Schema, b.q.schema); err != nil {
		return fmt.Errorf("billing: migrate: %w", err)
	}
	return nil
}

// Handle applies one delivered event in tx, the inbox's transaction (an
// [inbox.SQLHandlerFunc], on PostgreSQL and SQLite alike):
//
//   - OrderPlaced (v1 or v2): an OPEN invoice for the order, unless it has one.
//   - OrderPaid: the invoice becomes PAID.
//   - OrderCancelled: a paid order's invoice becomes CREDITED and gets a
//     credit note for its amount; an unpaid order's becomes VOID.
//   - An event whose order version is not above the invoice's is stale
//     (applied already) and changes nothing.
//
// Other event types are skipped. An unknown version or a broken payload
// gives an error wrapping inbox.ErrPermanent (park it); an event that
// comes before the one it follows gives one wrapping [ErrOutOfOrder].
func (b *Billing) Handle(ctx context.Context, tx *sql.Tx, msg inbox.Message) error {
	ev, err := events.Decode(msg)
	if errors.Is(err, events.ErrUnknownEventType) {
		b.cfg.Logger.Debug("billing: skipping an event type it does not use", slog.String("event_type", msg.EventType),
			slog.String("message_id", msg.ID.String()))
		return nil
	}
	if err != nil {
		return err
	}
	log := b.cfg.Logger.With(slog.String("order_id", msg.AggregateID), slog.String("message_id", msg.ID.String()))
	switch e := ev.(type) {
	case events.OrderPlaced:
		return b.invoice(ctx, tx, log, msg.ID, e)
	case events.OrderPaid:
		return b.apply(ctx, tx, log, msg, e.OrderID, e.Version, func(inv *Invoice) (*CreditNote, error) {
			if inv.Status != StatusOpen {
				return nil, fmt.Errorf("%w: OrderPaid for order %s, whose invoice is %s", inbox.ErrPermanent, e.OrderID, inv.Status)
			}
			inv.Status, inv.PaidAt = StatusPaid, e.PaidAt
			return nil, nil
		})
	case events.OrderCancelled:
		return b.apply(ctx, tx, log, msg, e.OrderID, e.Version, func(inv *Invoice) (*CreditNote, error) {
			switch {
			case e.PreviousStatus == events.StatusPaid && inv.Status == StatusOpen:
				return nil, fmt.Errorf("%w: OrderCancelled (version %d) of a paid order %s, but billing has not seen it paid (invoice at version %d)",
					ErrOutOfOrder, e.Version, e.OrderID, inv.OrderVersion)
			case e.PreviousStatus == events.StatusPaid:
				inv.Status = StatusCredited
				return &CreditNote{ID: uuid.Must(uuid.NewV7()), OrderID: e.OrderID, InvoiceID: inv.ID,
					AmountMinor: inv.AmountMinor, Currency: inv.Currency, EventID: msg.ID}, nil
			default:
				inv.Status = StatusVoid
				return nil, nil
			}
		})
	}
	return nil // OrderShipped and the inventory's events do not concern billing
}

// invoice creates the order's invoice unless it has one.
func (b *Billing) invoice(ctx context.Context, tx *sql.Tx, log *slog.Logger, eventID uuid.UUID, e events.OrderPlaced) error {
	id, err := uuid.NewV7()
	if err != nil {
		return fmt.Errorf("billing: new invoice id: %w", err)
	}
	res, err := tx.ExecContext(ctx, b.q.insertInvoice, id, e.OrderID, e.CustomerID, e.Total.AmountMinor, e.Total.Currency, e.Version, eventID)
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err != nil {
		return fmt.Errorf("billing: insert invoice of order %s: %w", e.OrderID, err)
	}
	if n == 0 {
		log.Info("billing: order has an invoice already; OrderPlaced ignored")
		return nil
	}
	log.Info("billing: invoice created", slog.String("invoice_id", id.String()),
		slog.Int64("amount_minor", e.Total.AmountMinor), slog.String("currency", e.Total.Currency))
	return nil
}

// apply changes the order's invoice with change, if the event's version is
// above the invoice's, and writes the credit note change returns, if any.
func (b *Billing) apply(ctx context.Context, tx *sql.Tx, log *slog.Logger, msg inbox.Message, orderID string, version int64,
	change func(*Invoice) (*CreditNote, error)) error {
	inv, err := scanInvoice(tx.QueryRowContext(ctx, b.q.lockInvoice, orderID))
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: %s (version %d) of order %s, which has no invoice yet", ErrOutOfOrder, msg.EventType, version, orderID)
	}
	if err != nil {
		return fmt.Errorf("billing: lock invoice of order %s: %w", orderID, err)
	}
	if version <= inv.OrderVersion {
		log.Info("billing: stale event ignored", slog.String("event_type", msg.EventType),
			slog.Int64("version", version), slog.Int64("invoice_order_version", inv.OrderVersion))
		return nil
	}
	note, err := change(&inv)
	if err != nil {
		return err
	}
	paidAt := sql.NullTime{Time: inv.PaidAt.UTC(), Valid: !inv.PaidAt.IsZero()} // NULL keeps it
	if _, err := tx.ExecContext(ctx, b.q.updateInvoice, inv.ID, inv.Status, version, paidAt); err != nil {
		return fmt.Errorf("billing: update invoice of order %s: %w", orderID, err)
	}
	log.Info("billing: invoice "+inv.Status, slog.String("invoice_id", inv.ID.String()), slog.Int64("version", version))
	if note == nil {
		return nil
	}
	if _, err := tx.ExecContext(ctx, b.q.insertCreditNote, note.ID, note.OrderID, note.InvoiceID, note.AmountMinor, note.Currency, note.EventID); err != nil {
		return fmt.Errorf("billing: insert credit note of order %s: %w", orderID, err)
	}
	log.Info("billing: credit note issued", slog.String("credit_note_id", note.ID.String()),
		slog.Int64("amount_minor", note.AmountMinor), slog.String("currency", note.Currency))
	return nil
}

// Invoice returns the order's invoice, or an error wrapping [ErrNotFound].
func (b *Billing) Invoice(ctx context.Context, orderID string) (Invoice, error) {
	inv, err := scanInvoice(b.db.QueryRowContext(ctx, b.q.getInvoice, orderID))
	if errors.Is(err, sql.ErrNoRows) {
		return Invoice{}, fmt.Errorf("%w: no invoice for order %s", ErrNotFound, orderID)
	}
	if err != nil {
		return Invoice{}, fmt.Errorf("billing: invoice of order %s: %w", orderID, err)
	}
	return inv, nil
}

// CreditNote returns the order's credit note, or an error wrapping
// [ErrNotFound].
func (b *Billing) CreditNote(ctx context.Context, orderID string) (CreditNote, error) {
	var n CreditNote
	err := b.db.QueryRowContext(ctx, b.q.getCreditNote, orderID).Scan(&n.ID, &n.OrderID, &n.InvoiceID, &n.AmountMinor, &n.Currency, &n.EventID, &n.CreatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return CreditNote{}, fmt.Errorf("%w: no credit note for order %s", ErrNotFound, orderID)
	}
	if err != nil {
		return CreditNote{}, fmt.Errorf("billing: credit note of order %s: %w", orderID, err)
	}
	return n, nil
}

func scanInvoice(row *sql.Row) (Invoice, error) {
	var (
		inv    Invoice
		paidAt sql.NullTime
	)
	if err := row.Scan(&inv.ID, &inv.OrderID, &inv.CustomerID, &inv.AmountMinor, &inv.Currency, &inv.Status,
		&inv.OrderVersion, &inv.EventID, &inv.CreatedAt, &paidAt); err != nil {
		return Invoice{}, err
	}
	inv.PaidAt = paidAt.Time // zero when NULL
	return inv, nil
}

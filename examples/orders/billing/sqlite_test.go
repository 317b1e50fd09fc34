package billing_test

import (
	"database/sql"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox/examples/orders/billing"
	"github.com/outbox-dev/outbox/examples/orders/events"
	"github.com/outbox-dev/outbox/inbox"
	"github.com/outbox-dev/outbox/store/sqlitestore"
)

// setupSQLite returns billing on a fresh SQLite file.
func setupSQLite(t *testing.T) (*billing.Billing, *sql.DB) {
	t.Helper()
	db, err := sqlitestore.Open(testCtx(t), filepath.Join(t.TempDir(), "billing.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	b, err := billing.NewSQLite(db, billing.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // idempotent
		if err := b.Migrate(testCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
	return b, db
}

// applySQL runs Handle in a write transaction of its own, as the SQLite
// inbox does, and commits unless it fails.
func applySQL(t *testing.T, b *billing.Billing, db *sql.DB, msg inbox.Message) error {
	t.Helper()
	tx, err := db.BeginTx(testCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Handle(testCtx(t), tx, msg); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func TestSQLite_InvoiceLifecycleWithCreditNote(t *testing.T) {
	t.Parallel()
	b, db := setupSQLite(t)
	order := uuid.NewString()
	place := event(t, placed(order))
	for _, m := range []inbox.Message{place, event(t, placed(order))} { // twice, another event id: one invoice
		if err := applySQL(t, b, db, m); err != nil {
			t.Fatal(err)
		}
	}
	inv, err := b.Invoice(testCtx(t), order)
	if err != nil {
		t.Fatal(err)
	}
	if inv.EventID != place.ID || inv.AmountMinor != 15000 || inv.Status != billing.StatusOpen || !inv.PaidAt.IsZero() || inv.CreatedAt.IsZero() {
		t.Fatalf("invoice %+v", inv)
	}
	paidAt := now.Truncate(1000)
	if err := applySQL(t, b, db, event(t, events.OrderPaid{OrderID: order, Version: 2, PaidAt: paidAt})); err != nil {
		t.Fatal(err)
	}
	if inv, _ = b.Invoice(testCtx(t), order); inv.Status != billing.StatusPaid || !inv.PaidAt.Equal(paidAt) || inv.OrderVersion != 2 {
		t.Fatalf("paid invoice %+v; want PAID at %s", inv, paidAt)
	}
	// A stale OrderPaid changes nothing.
	if err := applySQL(t, b, db, event(t, events.OrderPaid{OrderID: order, Version: 2, PaidAt: now})); err != nil {
		t.Fatal(err)
	}
	cancel := event(t, events.OrderCancelled{OrderID: order, Version: 3, PreviousStatus: events.StatusPaid, CancelledAt: now})
	if err := applySQL(t, b, db, cancel); err != nil {
		t.Fatal(err)
	}
	note, err := b.CreditNote(testCtx(t), order)
	if err != nil {
		t.Fatal(err)
	}
	if inv, _ = b.Invoice(testCtx(t), order); inv.Status != billing.StatusCredited || note.AmountMinor != 15000 || note.InvoiceID != inv.ID || note.EventID != cancel.ID {
		t.Errorf("invoice %+v, credit note %+v", inv, note)
	}
}

func TestSQLite_OrderPaidBeforeOrderPlacedIsOutOfOrderAndWritesNothing(t *testing.T) {
	t.Parallel()
	b, db := setupSQLite(t)
	order := uuid.NewString()
	err := applySQL(t, b, db, event(t, events.OrderPaid{OrderID: order, Version: 2, PaidAt: now}))
	if !errors.Is(err, billing.ErrOutOfOrder) {
		t.Fatalf("err %v; want ErrOutOfOrder", err)
	}
	if _, err := b.Invoice(testCtx(t), order); !errors.Is(err, billing.ErrNotFound) {
		t.Errorf("invoice after a refused event: %v; want ErrNotFound", err)
	}
}

package inventory_test

import (
	"database/sql"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox/examples/orders/events"
	"github.com/outbox-dev/outbox/examples/orders/inventory"
	"github.com/outbox-dev/outbox/inbox"
	"github.com/outbox-dev/outbox/store/sqlitestore"
)

// sqliteBundle is an inventory on a SQLite file with its outbox.
type sqliteBundle struct {
	inv *inventory.Inventory
	db  *sql.DB
}

func setupSQLite(t *testing.T) *sqliteBundle {
	t.Helper()
	db, err := sqlitestore.Open(testCtx(t), filepath.Join(t.TempDir(), "inventory.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	quiet := slog.New(slog.DiscardHandler)
	st, err := sqlitestore.New(db, sqlitestore.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.NewSQLite(db, st, inventory.Config{Logger: quiet,
		Stock: map[string]int64{"BOOK-1": 100, "MUG-1": 100, "LAMP-1": 5}})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // idempotent, and the seed leaves existing stock alone
		if err := inv.Migrate(testCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
	return &sqliteBundle{inv: inv, db: db}
}

// apply runs Handle in a write transaction, as the SQLite inbox does.
func (b *sqliteBundle) apply(t *testing.T, msg inbox.Message) {
	t.Helper()
	tx, err := b.db.BeginTx(testCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.inv.Handle(testCtx(t), tx, msg); err != nil {
		_ = tx.Rollback()
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func (b *sqliteBundle) stock(t *testing.T, sku string) (int64, int64) {
	t.Helper()
	a, r, err := b.inv.Stock(testCtx(t), sku)
	if err != nil {
		t.Fatal(err)
	}
	return a, r
}

// events returns the event types in the inventory's outbox, in order.
func (b *sqliteBundle) events(t *testing.T) []string {
	t.Helper()
	rows, err := b.db.QueryContext(testCtx(t), `SELECT event_type FROM outbox_messages ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func TestSQLite_ReserveOnceReleaseAndShip(t *testing.T) {
	t.Parallel()
	b := setupSQLite(t)
	a, c := uuid.NewString(), uuid.NewString()
	items := []events.Item{{SKU: "BOOK-1", Quantity: 2}, {SKU: "MUG-1", Quantity: 3}}
	b.apply(t, event(t, placed(a, items...)))
	b.apply(t, event(t, placed(a, items...))) // again, under another id: reserves nothing more
	b.apply(t, event(t, placed(c, events.Item{SKU: "BOOK-1", Quantity: 1})))
	if av, res := b.stock(t, "BOOK-1"); av != 97 || res != 3 {
		t.Fatalf("BOOK-1 available %d reserved %d; want 97 and 3", av, res)
	}
	r, err := b.inv.Reservation(testCtx(t), a)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != inventory.StatusReserved || len(r.Items) != 2 || r.CreatedAt.IsZero() {
		t.Fatalf("reservation %+v", r)
	}
	b.apply(t, event(t, events.OrderCancelled{OrderID: a, Version: 2, PreviousStatus: events.StatusPlaced, CancelledAt: now}))
	b.apply(t, event(t, events.OrderShipped{OrderID: c, Version: 3, ShippedAt: now}))
	if av, res := b.stock(t, "BOOK-1"); av != 99 || res != 0 {
		t.Errorf("BOOK-1 available %d reserved %d; want 99 and 0", av, res)
	}
	if av, res := b.stock(t, "MUG-1"); av != 100 || res != 0 {
		t.Errorf("MUG-1 available %d reserved %d; want 100 and 0", av, res)
	}
	want := []string{"StockReserved", "StockReserved", "StockReleased"}
	if got := b.events(t); len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("outbox events %v; want %v", got, want)
	}
}

func TestSQLite_UnknownSKUOrShortStockRejectsTheWholeOrder(t *testing.T) {
	t.Parallel()
	b := setupSQLite(t)
	order := uuid.NewString()
	b.apply(t, event(t, placed(order, events.Item{SKU: "BOOK-1", Quantity: 1}, events.Item{SKU: "LAMP-1", Quantity: 6},
		events.Item{SKU: "NOPE-1", Quantity: 1})))
	r, err := b.inv.Reservation(testCtx(t), order)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != inventory.StatusRejected || len(r.Rejected) != 2 {
		t.Fatalf("reservation %+v; want REJECTED with 2 lines", r)
	}
	if av, res := b.stock(t, "BOOK-1"); av != 100 || res != 0 {
		t.Errorf("BOOK-1 available %d reserved %d; want untouched", av, res)
	}
	if got := b.events(t); len(got) != 1 || got[0] != "StockRejected" {
		t.Errorf("outbox events %v; want StockRejected", got)
	}
}

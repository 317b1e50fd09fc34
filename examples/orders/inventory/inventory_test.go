package inventory_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/examples/orders/events"
	"github.com/outbox-dev/outbox/examples/orders/internal/eventtest"
	"github.com/outbox-dev/outbox/examples/orders/inventory"
	"github.com/outbox-dev/outbox/inbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// bundle is an inventory with its inbox and outbox, all in one schema.
type bundle struct {
	pool      *pgxpool.Pool
	schema    string
	inventory *inventory.Inventory
	inbox     *inbox.Inbox
}

func setup(t *testing.T) *bundle {
	t.Helper()
	pool, schema := pgtest.Schema(t)
	quiet := slog.New(slog.DiscardHandler)
	st, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	inb, err := inbox.New(pool, inbox.Config{Schema: schema, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.New(inb.SQL().DB(), st.SQL(), inventory.Config{Schema: schema, Logger: quiet,
		Stock: map[string]int64{"BOOK-1": 100, "MUG-1": 100, "LAMP-1": 5}})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []func(context.Context) error{st.Migrate, inv.Migrate, inb.Migrate} {
		if err := m(testCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
	return &bundle{pool: pool, schema: schema, inventory: inv, inbox: inb}
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (b *bundle) deliver(t *testing.T, msg inbox.Message) (inbox.Result, error) {
	t.Helper()
	return b.inbox.SQL().Handle(testCtx(t), inventory.Group, msg, b.inventory.Handle)
}

func (b *bundle) must(t *testing.T, msg inbox.Message) inbox.Result {
	t.Helper()
	res, err := b.deliver(t, msg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func event(t *testing.T, e events.Event) inbox.Message {
	t.Helper()
	m, err := events.Message(e, events.TopicOrders)
	if err != nil {
		t.Fatal(err)
	}
	m.ID = uuid.Must(uuid.NewV7())
	return eventtest.Delivered(t, m)
}

var now = time.Now().UTC()

func placed(orderID string, items ...events.Item) events.OrderPlaced {
	if items == nil {
		items = []events.Item{}
	}
	return events.OrderPlaced{OrderID: orderID, CustomerID: "C-1", Total: events.Money{AmountMinor: 1000, Currency: "EUR"},
		Items: items, Version: 1, PlacedAt: now}
}

func (b *bundle) stock(t *testing.T, sku string) (available, reserved int64) {
	t.Helper()
	a, r, err := b.inventory.Stock(testCtx(t), sku)
	if err != nil {
		t.Fatal(err)
	}
	return a, r
}

// published is an event in the inventory's outbox.
type published struct {
	EventType, AggregateType, AggregateID, Topic, CausationID string
	Payload                                                   json.RawMessage
}

func (b *bundle) outbox(t *testing.T) []published {
	t.Helper()
	rows, err := b.pool.Query(testCtx(t), `SELECT event_type, aggregate_type, aggregate_id, topic, causation_id, payload
		FROM `+pgx.Identifier{b.schema, "outbox_messages"}.Sanitize()+` ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (published, error) {
		var p published
		err := row.Scan(&p.EventType, &p.AggregateType, &p.AggregateID, &p.Topic, &p.CausationID, &p.Payload)
		return p, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestInventory_ReservesAnOrdersItemsOnceHoweverOftenItArrives(t *testing.T) {
	t.Parallel()
	b := setup(t)
	order := uuid.NewString()
	msg := event(t, placed(order, events.Item{SKU: "BOOK-1", Quantity: 2}, events.Item{SKU: "MUG-1", Quantity: 1}))
	if res := b.must(t, msg); res != inbox.Processed {
		t.Fatalf("first delivery: %s", res)
	}
	if res := b.must(t, msg); res != inbox.Duplicate {
		t.Fatalf("redelivery: %s; want duplicate", res)
	}
	b.must(t, event(t, placed(order, events.Item{SKU: "BOOK-1", Quantity: 2}, events.Item{SKU: "MUG-1", Quantity: 1}))) // same order, another id

	if a, r := b.stock(t, "BOOK-1"); a != 98 || r != 2 {
		t.Errorf("BOOK-1: %d available, %d reserved; want 98 and 2", a, r)
	}
	if a, r := b.stock(t, "MUG-1"); a != 99 || r != 1 {
		t.Errorf("MUG-1: %d available, %d reserved; want 99 and 1", a, r)
	}
	res, err := b.inventory.Reservation(testCtx(t), order)
	if err != nil || res.Status != inventory.StatusReserved || res.EventID != msg.ID || len(res.Items) != 2 {
		t.Fatalf("reservation %+v, %v", res, err)
	}
	out := b.outbox(t)
	if len(out) != 1 || out[0].EventType != "StockReserved" || out[0].AggregateType != "Reservation" ||
		out[0].AggregateID != order || out[0].Topic != "inventory" || out[0].CausationID != msg.ID.String() {
		t.Errorf("outbox %+v; want one StockReserved of Reservation/%s on inventory, caused by %s", out, order, msg.ID)
	}
}

func TestInventory_OrderWithoutItemsReservesNothingButIsProcessed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	order := uuid.NewString()
	msg := event(t, placed(order))
	if res := b.must(t, msg); res != inbox.Processed {
		t.Fatalf("delivery: %s; want processed", res)
	}
	if res := b.must(t, msg); res != inbox.Duplicate {
		t.Fatalf("redelivery: %s; want duplicate (it was recorded as processed)", res)
	}
	if _, err := b.inventory.Reservation(testCtx(t), order); !errors.Is(err, inventory.ErrNotFound) {
		t.Errorf("an order without items has a reservation (%v)", err)
	}
	if out := b.outbox(t); len(out) != 0 {
		t.Errorf("published %+v for an order without items", out)
	}
}

func TestInventory_UnknownSKURejectsThroughTheOutboxAndReservesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	order := uuid.NewString()
	msg := event(t, placed(order, events.Item{SKU: "BOOK-1", Quantity: 1}, events.Item{SKU: "NOPE-9", Quantity: 1}))
	if res, err := b.deliver(t, msg); err != nil || res != inbox.Processed {
		t.Fatalf("delivery: %s, %v; want processed without an error (a rejection is a result, not a failure)", res, err)
	}
	if a, r := b.stock(t, "BOOK-1"); a != 100 || r != 0 {
		t.Errorf("BOOK-1: %d available, %d reserved; want untouched", a, r)
	}
	res, _ := b.inventory.Reservation(testCtx(t), order)
	if res.Status != inventory.StatusRejected || len(res.Rejected) != 1 || res.Rejected[0].Problem != events.ProblemUnknownSKU {
		t.Errorf("reservation %+v", res)
	}
	out := b.outbox(t)
	if len(out) != 1 || out[0].EventType != "StockRejected" || out[0].AggregateID != order {
		t.Fatalf("outbox %+v; want one StockRejected", out)
	}
	var rej events.StockRejected
	if err := json.Unmarshal(out[0].Payload, &rej); err != nil {
		t.Fatal(err)
	}
	if len(rej.Lines) != 1 || rej.Lines[0] != (events.RejectedLine{SKU: "NOPE-9", Quantity: 1, Problem: events.ProblemUnknownSKU}) {
		t.Errorf("StockRejected lines %+v", rej.Lines)
	}
}

func TestInventory_TooLittleStockRejectsNamingWhatIsAvailable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	order := uuid.NewString()
	b.must(t, event(t, placed(order, events.Item{SKU: "LAMP-1", Quantity: 6})))
	res, _ := b.inventory.Reservation(testCtx(t), order)
	want := events.RejectedLine{SKU: "LAMP-1", Quantity: 6, Available: 5, Problem: events.ProblemInsufficientStock}
	if res.Status != inventory.StatusRejected || len(res.Rejected) != 1 || res.Rejected[0] != want {
		t.Errorf("reservation %+v; want rejected %+v", res, want)
	}
	if a, _ := b.stock(t, "LAMP-1"); a != 5 {
		t.Errorf("LAMP-1 available %d; want 5", a)
	}
}

func TestInventory_ConcurrentOrdersNeverOversell(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var wg sync.WaitGroup
	for range 12 {
		wg.Go(func() {
			if _, err := b.deliver(t, event(t, placed(uuid.NewString(), events.Item{SKU: "LAMP-1", Quantity: 1}, events.Item{SKU: "BOOK-1", Quantity: 1}))); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if a, r := b.stock(t, "LAMP-1"); a != 0 || r != 5 {
		t.Errorf("LAMP-1: %d available, %d reserved; want 0 and 5", a, r)
	}
	if a, r := b.stock(t, "BOOK-1"); a != 95 || r != 5 {
		t.Errorf("BOOK-1: %d available, %d reserved; want 95 and 5 (rejected orders reserve none of their items)", a, r)
	}
	kinds := map[string]int{}
	for _, p := range b.outbox(t) {
		kinds[p.EventType]++
	}
	if kinds["StockReserved"] != 5 || kinds["StockRejected"] != 7 {
		t.Errorf("published %v; want 5 StockReserved and 7 StockRejected", kinds)
	}
}

func TestInventory_CancelReleasesAndShipSettlesTheReservation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cancelled, shipped := uuid.NewString(), uuid.NewString()
	b.must(t, event(t, placed(cancelled, events.Item{SKU: "BOOK-1", Quantity: 3})))
	b.must(t, event(t, placed(shipped, events.Item{SKU: "BOOK-1", Quantity: 2})))
	cancel := event(t, events.OrderCancelled{OrderID: cancelled, Version: 2, PreviousStatus: events.StatusPlaced, CancelledAt: now})
	b.must(t, cancel)
	b.must(t, event(t, events.OrderShipped{OrderID: shipped, Version: 3, ShippedAt: now}))
	b.must(t, event(t, events.OrderCancelled{OrderID: cancelled, Version: 2, PreviousStatus: events.StatusPlaced, CancelledAt: now})) // again, other id

	if a, r := b.stock(t, "BOOK-1"); a != 98 || r != 0 {
		t.Errorf("BOOK-1: %d available, %d reserved; want 98 (2 shipped) and 0", a, r)
	}
	for order, want := range map[string]string{cancelled: inventory.StatusReleased, shipped: inventory.StatusShipped} {
		if r, _ := b.inventory.Reservation(testCtx(t), order); r.Status != want {
			t.Errorf("reservation %s; want %s", r.Status, want)
		}
	}
	released := 0
	for _, p := range b.outbox(t) {
		if p.EventType == "StockReleased" {
			released++
			if p.CausationID != cancel.ID.String() {
				t.Errorf("StockReleased caused by %s; want %s", p.CausationID, cancel.ID)
			}
		}
	}
	if released != 1 {
		t.Errorf("%d StockReleased; want 1", released)
	}
}

func TestInventory_AcceptsOrderPlacedV1AndParksAnUnknownVersion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	v1 := uuid.NewString()
	b.must(t, event(t, events.OrderPlacedV1{OrderID: v1, CustomerID: "C-1", Amount: "1.00", Currency: "EUR",
		Items: []events.Item{{SKU: "MUG-1", Quantity: 4}}, Version: 1, PlacedAt: now}))
	if a, _ := b.stock(t, "MUG-1"); a != 96 {
		t.Errorf("MUG-1 available %d after a v1 order of 4; want 96", a)
	}
	v3 := event(t, placed(uuid.NewString(), events.Item{SKU: "MUG-1", Quantity: 1}))
	v3.EventVersion = 3
	if _, err := b.deliver(t, v3); !errors.Is(err, inbox.ErrPermanent) || !errors.Is(err, events.ErrUnknownVersion) {
		t.Errorf("v3: %v; want a permanent unknown-version error", err)
	}
	if a, _ := b.stock(t, "MUG-1"); a != 96 {
		t.Errorf("a v3 order changed the stock to %d", a)
	}
}

func TestMigrate_SeedsOnlySKUsWithoutStock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.must(t, event(t, placed(uuid.NewString(), events.Item{SKU: "BOOK-1", Quantity: 10})))
	if err := b.inventory.Migrate(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if a, _ := b.stock(t, "BOOK-1"); a != 90 {
		t.Errorf("BOOK-1 available %d after a second Migrate; want 90 (not reset)", a)
	}
}

func TestNew_NamesTheBadField(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Schema(t)
	st, _ := pgstore.New(pool, pgstore.Config{Schema: schema})
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	for field, c := range map[string]struct {
		ob  outbox.Enqueuer[*sql.Tx]
		cfg inventory.Config
	}{
		"outbox": {},
		"Schema": {st.SQL(), inventory.Config{Schema: "x y"}},
		"Topic":  {st.SQL(), inventory.Config{Topic: "no spaces"}},
		"Stock":  {st.SQL(), inventory.Config{Stock: map[string]int64{"A": -1}}},
	} {
		if _, err := inventory.New(db, c.ob, c.cfg); !errors.Is(err, inventory.ErrInvalidConfig) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v; want ErrInvalidConfig naming it", field, err)
		}
	}
}

package billing_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/outbox-dev/outbox/examples/orders/billing"
	"github.com/outbox-dev/outbox/examples/orders/events"
	"github.com/outbox-dev/outbox/examples/orders/internal/eventtest"
	"github.com/outbox-dev/outbox/inbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
)

type bundle struct {
	billing *billing.Billing
	inbox   *inbox.Inbox
}

func setup(t *testing.T) *bundle {
	t.Helper()
	pool, schema := pgtest.Schema(t)
	quiet := slog.New(slog.DiscardHandler)
	inb, err := inbox.New(pool, inbox.Config{Schema: schema, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	b, err := billing.New(inb.SQL().DB(), billing.Config{Schema: schema, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Migrate(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := inb.Migrate(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	return &bundle{billing: b, inbox: inb}
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// deliver hands msg to billing through the inbox, as the consumer does.
func (b *bundle) deliver(t *testing.T, msg inbox.Message) (inbox.Result, error) {
	t.Helper()
	return b.inbox.SQL().Handle(testCtx(t), billing.Group, msg, b.billing.Handle)
}

// event returns e as delivered on the orders topic, with a fresh event id.
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

func placed(orderID string) events.OrderPlaced {
	return events.OrderPlaced{OrderID: orderID, CustomerID: "C-1", Total: events.Money{AmountMinor: 15000, Currency: "EUR"},
		Items: []events.Item{}, Version: 1, PlacedAt: now}
}

// must delivers msg and fails the test if that fails.
func (b *bundle) must(t *testing.T, msg inbox.Message) inbox.Result {
	t.Helper()
	res, err := b.deliver(t, msg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestBilling_OneInvoicePerOrderHoweverOftenOrderPlacedArrives(t *testing.T) {
	t.Parallel()
	b := setup(t)
	order := uuid.NewString()
	msg := event(t, placed(order))
	if res := b.must(t, msg); res != inbox.Processed {
		t.Fatalf("first delivery: %s", res)
	}
	for range 3 {
		if res := b.must(t, msg); res != inbox.Duplicate {
			t.Fatalf("redelivery: %s; want duplicate", res)
		}
	}
	// The same order published again under another event id: the unique
	// order id keeps it at one invoice.
	b.must(t, event(t, placed(order)))
	inv, err := b.billing.Invoice(testCtx(t), order)
	if err != nil {
		t.Fatal(err)
	}
	if inv.EventID != msg.ID || inv.AmountMinor != 15000 || inv.Currency != "EUR" || inv.Status != billing.StatusOpen || inv.OrderVersion != 1 {
		t.Errorf("invoice %+v", inv)
	}
}

func TestBilling_ConcurrentDeliveriesOfOneOrderPlacedMakeOneInvoice(t *testing.T) {
	t.Parallel()
	b := setup(t)
	order := uuid.NewString()
	msg := event(t, placed(order))
	results := make(chan inbox.Result, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			res, err := b.deliver(t, msg)
			if err != nil {
				t.Error(err)
			}
			results <- res
		})
	}
	wg.Wait()
	close(results)
	processed := 0
	for r := range results {
		if r == inbox.Processed {
			processed++
		}
	}
	if processed != 1 {
		t.Errorf("%d deliveries processed; want 1, the rest duplicates", processed)
	}
}

func TestBilling_AcceptsOrderPlacedV1AndV2Alike(t *testing.T) {
	t.Parallel()
	b := setup(t)
	v1Order, v2Order := uuid.NewString(), uuid.NewString()
	b.must(t, event(t, events.OrderPlacedV1{OrderID: v1Order, CustomerID: "C-1", Amount: "150.00", Currency: "EUR", Version: 1, PlacedAt: now}))
	b.must(t, event(t, placed(v2Order)))
	for _, id := range []string{v1Order, v2Order} {
		inv, err := b.billing.Invoice(testCtx(t), id)
		if err != nil || inv.AmountMinor != 15000 || inv.Currency != "EUR" {
			t.Errorf("invoice of %s: %+v, %v; want 15000 EUR", id, inv, err)
		}
	}
}

func TestBilling_UnknownVersionIsParkedNotApplied(t *testing.T) {
	t.Parallel()
	b := setup(t)
	order := uuid.NewString()
	msg := event(t, placed(order))
	msg.EventVersion = 3
	_, err := b.deliver(t, msg)
	if !errors.Is(err, inbox.ErrPermanent) || !errors.Is(err, events.ErrUnknownVersion) {
		t.Fatalf("v3: %v; want a permanent unknown-version error", err)
	}
	if _, err := b.billing.Invoice(testCtx(t), order); !errors.Is(err, billing.ErrNotFound) {
		t.Errorf("a v3 OrderPlaced made an invoice (%v)", err)
	}
}

func TestBilling_CancelledPaidOrderGetsACreditNote(t *testing.T) {
	t.Parallel()
	b := setup(t)
	order := uuid.NewString()
	b.must(t, event(t, placed(order)))
	b.must(t, event(t, events.OrderPaid{OrderID: order, Version: 2, PaidAt: now}))
	cancel := event(t, events.OrderCancelled{OrderID: order, Version: 3, PreviousStatus: events.StatusPaid, CancelledAt: now})
	b.must(t, cancel)
	b.must(t, cancel)

	inv, err := b.billing.Invoice(testCtx(t), order)
	if err != nil || inv.Status != billing.StatusCredited || inv.PaidAt.IsZero() || inv.OrderVersion != 3 {
		t.Fatalf("invoice %+v, %v; want CREDITED at version 3, paid", inv, err)
	}
	note, err := b.billing.CreditNote(testCtx(t), order)
	if err != nil || note.InvoiceID != inv.ID || note.AmountMinor != 15000 || note.Currency != "EUR" || note.EventID != cancel.ID {
		t.Fatalf("credit note %+v, %v", note, err)
	}
}

func TestBilling_CancelledUnpaidOrderVoidsTheInvoiceWithoutCreditNote(t *testing.T) {
	t.Parallel()
	b := setup(t)
	order := uuid.NewString()
	b.must(t, event(t, placed(order)))
	b.must(t, event(t, events.OrderCancelled{OrderID: order, Version: 2, PreviousStatus: events.StatusPlaced, CancelledAt: now}))
	if inv, _ := b.billing.Invoice(testCtx(t), order); inv.Status != billing.StatusVoid {
		t.Errorf("invoice %s; want VOID", inv.Status)
	}
	if _, err := b.billing.CreditNote(testCtx(t), order); !errors.Is(err, billing.ErrNotFound) {
		t.Errorf("credit note for an unpaid order (%v)", err)
	}
}

// An event that needs an earlier one is retried, not applied and not
// parked at once: the earlier one may still be on its way.
func TestBilling_EventBeforeTheOneItFollowsIsRetried(t *testing.T) {
	t.Parallel()
	b := setup(t)
	order := uuid.NewString()
	paid := event(t, events.OrderPaid{OrderID: order, Version: 2, PaidAt: now})
	if _, err := b.deliver(t, paid); !errors.Is(err, billing.ErrOutOfOrder) || errors.Is(err, inbox.ErrPermanent) {
		t.Fatalf("OrderPaid before OrderPlaced: %v; want ErrOutOfOrder, not permanent", err)
	}
	b.must(t, event(t, placed(order)))
	cancelPaid := event(t, events.OrderCancelled{OrderID: order, Version: 3, PreviousStatus: events.StatusPaid, CancelledAt: now})
	if _, err := b.deliver(t, cancelPaid); !errors.Is(err, billing.ErrOutOfOrder) {
		t.Fatalf("cancel of a paid order billing has not seen paid: %v; want ErrOutOfOrder", err)
	}
	// The retry of OrderPaid, then of the cancellation, apply.
	if res := b.must(t, paid); res != inbox.Processed {
		t.Fatalf("retried OrderPaid: %s", res)
	}
	b.must(t, cancelPaid)
	if _, err := b.billing.CreditNote(testCtx(t), order); err != nil {
		t.Errorf("no credit note after the retries: %v", err)
	}
}

func TestBilling_StaleEventChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	order := uuid.NewString()
	b.must(t, event(t, placed(order)))
	b.must(t, event(t, events.OrderCancelled{OrderID: order, Version: 2, PreviousStatus: events.StatusPlaced, CancelledAt: now}))
	// An OrderPaid of version 2 under another id: older than what billing
	// applied, so ignored rather than failing on the VOID invoice.
	if res := b.must(t, event(t, events.OrderPaid{OrderID: order, Version: 2, PaidAt: now})); res != inbox.Processed {
		t.Fatalf("stale event: %s", res)
	}
	if inv, _ := b.billing.Invoice(testCtx(t), order); inv.Status != billing.StatusVoid || !inv.PaidAt.IsZero() {
		t.Errorf("invoice %+v after a stale OrderPaid", inv)
	}
}

func TestBilling_SkipsEventsItDoesNotUse(t *testing.T) {
	t.Parallel()
	b := setup(t)
	order := uuid.NewString()
	b.must(t, event(t, events.OrderShipped{OrderID: order, Version: 3, ShippedAt: now}))
	unknown := event(t, placed(order))
	unknown.EventType = "OrderGiftWrapped"
	if res := b.must(t, unknown); res != inbox.Processed {
		t.Errorf("unknown type: %s; want processed (skipped)", res)
	}
	if _, err := b.billing.Invoice(testCtx(t), order); !errors.Is(err, billing.ErrNotFound) {
		t.Errorf("skipped events made an invoice (%v)", err)
	}
}

func TestNew_RejectsABadSchema(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Schema(t)
	if _, err := billing.New(stdlib.OpenDBFromPool(pool), billing.Config{Schema: "Billing"}); !errors.Is(err, billing.ErrInvalidConfig) {
		t.Errorf("New with schema Billing: %v; want ErrInvalidConfig", err)
	}
}

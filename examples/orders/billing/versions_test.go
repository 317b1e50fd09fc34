package billing_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/consumer"
	"github.com/outbox-dev/outbox/examples/orders/billing"
	"github.com/outbox-dev/outbox/examples/orders/events"
	"github.com/outbox-dev/outbox/inbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/sink/kafka"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// The whole path of a version change: events published through the
// outbox and the relay with eventVersion 1, 2 and (from a producer ahead
// of its consumers) 3. Billing invoices the first two alike and the runner
// parks the third at once, with a reason that says what happened.
func TestBilling_ThroughRelayAndRunner_AcceptsV1AndV2AndParksAnUnknownVersion(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	quiet := slog.New(slog.DiscardHandler)
	pool, schema := pgtest.Schema(t)
	st, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	inb, err := inbox.New(pool, inbox.Config{Schema: schema, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	b, err := billing.New(inb.SQL().DB(), billing.Config{Schema: schema, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []func(context.Context) error{st.Migrate, b.Migrate, inb.Migrate} {
		if err := m(ctx); err != nil {
			t.Fatal(err)
		}
	}
	brk, err := broker.Start(broker.Config{Listen: "127.0.0.1:0", SeedTopics: []string{events.TopicOrders}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer brk.Close()

	v1Order, v2Order, v3Order := uuid.NewString(), uuid.NewString(), uuid.NewString()
	var msgs []outbox.Message
	for _, e := range []events.Event{
		events.OrderPlacedV1{OrderID: v1Order, CustomerID: "C-1", Amount: "19.90", Currency: "EUR", Version: 1, PlacedAt: now},
		placed(v2Order),
		placed(v3Order),
	} {
		m, err := events.Message(e, events.TopicOrders)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	msgs[2].EventVersion = 3 // a producer upgraded before its consumers
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return st.Enqueue(ctx, tx, msgs...) }); err != nil {
		t.Fatal(err)
	}

	snk, err := kafka.New(kafka.Config{Brokers: brk.Addrs(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer snk.Close()
	rl, err := relay.New(relay.Config{Store: st, Sink: snk, PollInterval: 100 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := rl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer rl.Stop(context.Background())
	runner, err := consumer.New(consumer.Config{Brokers: brk.Addrs(), Group: billing.Group, Topics: []string{events.TopicOrders},
		Applier: inb.SQL().Bind(b.Handle), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stopRunner := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- runner.Run(runCtx) }()
	defer func() { stopRunner(); <-ran }()

	var parked []inbox.Parked
	for {
		parked, err = inb.Parked(ctx, inbox.ParkedFilter{Consumer: billing.Group})
		if err != nil {
			t.Fatal(err)
		}
		_, err1 := b.Invoice(ctx, v1Order)
		_, err2 := b.Invoice(ctx, v2Order)
		if len(parked) > 0 && err1 == nil && err2 == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("not done in time: %d parked, invoices: %v, %v", len(parked), err1, err2)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for id, want := range map[string]int64{v1Order: 1990, v2Order: 15000} {
		if inv, _ := b.Invoice(ctx, id); inv.AmountMinor != want {
			t.Errorf("invoice of %s: %d; want %d", id, inv.AmountMinor, want)
		}
	}
	if len(parked) != 1 {
		t.Fatalf("%d parked; want 1", len(parked))
	}
	p := parked[0]
	if p.Message.AggregateID != v3Order || p.Message.EventVersion != 3 || p.Attempts != 1 ||
		!strings.Contains(p.Error, "OrderPlaced version 3") || !strings.Contains(p.Error, "knows versions 1 to 2") {
		t.Errorf("parked %s v%d after %d attempts with %q; want the v3 OrderPlaced of %s, parked at once, saying which versions are known",
			p.Message.AggregateID, p.Message.EventVersion, p.Attempts, p.Error, v3Order)
	}
	if _, err := b.Invoice(ctx, v3Order); err == nil {
		t.Error("the v3 order was invoiced")
	}
}

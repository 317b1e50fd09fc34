package orders_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/examples/orders/billing"
	"github.com/outbox-dev/outbox/examples/orders/events"
	"github.com/outbox-dev/outbox/examples/orders/inventory"
	"github.com/outbox-dev/outbox/examples/orders/orderservice"
	"github.com/outbox-dev/outbox/store/sqlitestore"
)

// The pieces run as their mains run them (Run), each on a SQLite file of
// its own, the order service and the inventory relaying their outboxes
// themselves: an order placed over HTTP gets its invoice and its
// reservation, and each Run returns nil once stopped.
func TestRun_PiecesOnSQLiteFiles_AnOrderGetsItsInvoiceAndReservation(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	quiet := slog.New(slog.DiscardHandler)
	brk, err := broker.Start(broker.Config{Listen: "127.0.0.1:0", SeedTopics: []string{events.TopicOrders, events.TopicInventory}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer brk.Close()
	dir := t.TempDir()
	file := func(name string) string { return filepath.Join(dir, name) }

	runCtx, stop := context.WithCancel(ctx)
	addrs := make(chan string, 1)
	done := make(chan error, 3)
	go func() {
		done <- orderservice.Run(runCtx, orderservice.RunConfig{SQLitePath: file("orders.db"), Brokers: brk.Addrs(),
			Listen: "127.0.0.1:0", Service: orderservice.Config{Logger: quiet}, Ready: func(a string) { addrs <- a }})
	}()
	go func() {
		cfg := billing.RunConfig{SQLitePath: file("billing.db"), Billing: billing.Config{Logger: quiet}}
		cfg.Consumer.Brokers = brk.Addrs()
		done <- billing.Run(runCtx, cfg)
	}()
	go func() {
		cfg := inventory.RunConfig{SQLitePath: file("inventory.db"), Inventory: inventory.Config{Logger: quiet}}
		cfg.Consumer.Brokers = brk.Addrs()
		done <- inventory.Run(runCtx, cfg)
	}()

	var addr string
	select {
	case addr = <-addrs:
	case err := <-done:
		t.Fatalf("a piece stopped before the order service listened: %v", err)
	}
	resp, err := http.Post("http://"+addr+"/orders", "application/json",
		bytes.NewBufferString(`{"customerId":"C-1","amount":"150.00","currency":"EUR","items":[{"sku":"BOOK-1","quantity":2}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var order orderservice.Order
	err = json.NewDecoder(resp.Body).Decode(&order)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /orders: %d, %v", resp.StatusCode, err)
	}

	bill, inv := openBilling(t, file("billing.db")), openInventory(t, file("inventory.db"))
	for {
		invoice, ierr := bill.Invoice(ctx, order.ID.String())
		reservation, rerr := inv.Reservation(ctx, order.ID.String())
		if ierr == nil && rerr == nil {
			if invoice.AmountMinor != 15000 || reservation.Status != inventory.StatusReserved {
				t.Errorf("invoice %+v, reservation %+v; want 150.00 EUR and RESERVED", invoice, reservation)
			}
			break
		}
		// Not there yet (or the piece has not created its tables yet).
		select {
		case <-ctx.Done():
			t.Fatalf("no invoice (%v) or no reservation (%v) of order %s in time", ierr, rerr, order.ID)
		case <-time.After(50 * time.Millisecond):
		}
	}
	stop()
	for range 3 {
		if err := <-done; err != nil {
			t.Errorf("Run after stop: %v", err)
		}
	}
}

func TestRun_NeedsExactlyOneDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if err := orderservice.Run(ctx, orderservice.RunConfig{}); !errors.Is(err, orderservice.ErrInvalidConfig) {
		t.Errorf("orderservice.Run without a database: %v; want ErrInvalidConfig", err)
	}
	if err := billing.Run(ctx, billing.RunConfig{DatabaseURL: "postgres://x", SQLitePath: "b.db"}); !errors.Is(err, billing.ErrInvalidConfig) {
		t.Errorf("billing.Run with two databases: %v; want ErrInvalidConfig", err)
	}
	if err := inventory.Run(ctx, inventory.RunConfig{}); !errors.Is(err, inventory.ErrInvalidConfig) {
		t.Errorf("inventory.Run without a database: %v; want ErrInvalidConfig", err)
	}
}

// openBilling reads billing's SQLite file beside the running process.
func openBilling(t *testing.T, path string) *billing.Billing {
	t.Helper()
	b, err := billing.NewSQLite(openSQLite(t, path), billing.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// openInventory reads the inventory's SQLite file beside the running
// process.
func openInventory(t *testing.T, path string) *inventory.Inventory {
	t.Helper()
	db := openSQLite(t, path)
	st, err := sqlitestore.New(db, sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.NewSQLite(db, st, inventory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

func openSQLite(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sqlitestore.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

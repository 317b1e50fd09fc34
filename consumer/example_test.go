package consumer_test

import (
	"context"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox/consumer"
	"github.com/outbox-dev/outbox/inbox"
)

// The inventory service: reserve stock for each OrderPlaced event, once,
// until SIGINT or SIGTERM.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	pool, err := pgxpool.New(ctx, "postgres://inventory@localhost:5432/inventory")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	ib, err := inbox.New(pool, inbox.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if err := ib.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	r, err := consumer.New(consumer.Config{
		Brokers: []string{"localhost:9092"},
		Group:   "inventory-service",
		Topics:  []string{"orders"},
		Inbox:   ib,
		Handler: func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
			if m.EventType != "OrderPlaced" {
				return nil // not ours; recorded as processed all the same
			}
			_, err := tx.Exec(ctx, "UPDATE stock SET reserved = reserved + 1 WHERE order_id = $1", m.AggregateID)
			return err
		},
		Hooks: consumer.Hooks{
			Handled: func(m inbox.Message, res inbox.Result, latency time.Duration) {
				// e.g. count res per m.EventType, observe latency
			},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := r.Run(ctx); err != nil { // returns after a clean stop
		log.Fatal(err)
	}
}

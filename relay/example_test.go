package relay_test

import (
	"context"
	"log"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/sink/kafka"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// A relay over a PostgreSQL outbox, publishing to Kafka until SIGINT or
// SIGTERM. Any number of relays may run over the same outbox: they share
// the work, and each aggregate's events stay in order.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, "postgres://relay@db:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	st, err := pgstore.New(pool, pgstore.Config{Schema: "outbox"})
	if err != nil {
		log.Fatal(err)
	}
	snk, err := kafka.New(kafka.Config{Brokers: []string{"kafka-1:9092"},
		TopicByAggregateType: map[string]string{"Order": "orders"}})
	if err != nil {
		log.Fatal(err)
	}
	defer snk.Close()

	r, err := relay.New(relay.Config{Store: st, Sink: snk})
	if err != nil {
		log.Fatal(err) // wraps relay.ErrInvalidConfig and names the field
	}
	if err := r.Start(ctx); err != nil {
		log.Fatal(err)
	}
	<-ctx.Done() // r.Run(ctx) does Start, this wait and Stop
	// Stop claims no more, waits for the acks in flight and releases the
	// leases of what was not sent, for the next relay to publish.
	if err := r.Stop(context.Background()); err != nil {
		log.Print(err)
	}
}

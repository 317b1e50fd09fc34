package modes_test

import (
	"context"
	"log"
	"log/slog"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/relay/modes"
	"github.com/outbox-dev/outbox/sink/kafka"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// A relay over a PostgreSQL outbox that runs whichever strategy the
// outbox records ("outbox mode"), as "outbox relay" does, until SIGTERM.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, "postgres://relay@localhost:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	st, err := pgstore.New(pool, pgstore.Config{Schema: "outbox"})
	if err != nil {
		log.Fatal(err)
	}
	sink, err := kafka.New(kafka.Config{Brokers: []string{"localhost:9092"}, DefaultTopic: "events"})
	if err != nil {
		log.Fatal(err)
	}
	defer sink.Close()

	r, err := relay.New(relay.Config{Strategy: modes.New(st, slog.Default()), Sink: sink})
	if err != nil {
		log.Fatal(err)
	}
	if err := r.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

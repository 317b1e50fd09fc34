package cdc_test

import (
	"context"
	"log"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox/relay/cdc"
	"github.com/outbox-dev/outbox/sink/kafka"
)

// A relay in CDC mode next to the application: it reads the outbox inserts
// of schema "outbox" from the WAL and publishes them to Kafka until
// SIGTERM.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, "postgres://relay@db:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	snk, err := kafka.New(kafka.Config{Brokers: []string{"kafka-1:9092"},
		TopicByAggregateType: map[string]string{"Order": "orders"}})
	if err != nil {
		log.Fatal(err)
	}
	defer snk.Close()
	r, err := cdc.New(cdc.Config{Pool: pool, Sink: snk, Schema: "outbox"})
	if err != nil {
		log.Fatal(err)
	}
	if err := r.Run(ctx); err != nil {
		log.Fatal(err) // for instance cdc.ErrSlotLost, with how to recover
	}
}

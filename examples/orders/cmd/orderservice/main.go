// Command orderservice runs the order service of the reference order
// system as a process of its own: the HTTP API over PostgreSQL, next to
// 'outbox relay' (which publishes its outbox), or over a SQLite file, whose
// outbox it publishes itself.
//
//	go run ./examples/orders/cmd/orderservice --database-url postgres://postgres@127.0.0.1:5432/test
//	go run ./examples/orders/cmd/orderservice --sqlite orders.db --kafka-brokers 127.0.0.1:9092
//
// It runs until SIGINT or SIGTERM and lets the requests in progress finish.
// 'outbox-lab example orders' runs the same on PostgreSQL.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/outbox-dev/outbox/examples/orders/events"
	"github.com/outbox-dev/outbox/examples/orders/orderservice"
	"github.com/outbox-dev/outbox/store/pgstore"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cfg := orderservice.RunConfig{Service: orderservice.Config{Logger: log}}
	flag.StringVar(&cfg.DatabaseURL, "database-url", os.Getenv("OUTBOX_DATABASE_URL"), "PostgreSQL `URL` of the orders and their outbox (env OUTBOX_DATABASE_URL)")
	flag.StringVar(&cfg.OutboxSchema, "schema", cmp.Or(os.Getenv("OUTBOX_SCHEMA"), pgstore.DefaultSchema), "PostgreSQL `schema` of the outbox, created by 'outbox migrate' (env OUTBOX_SCHEMA)")
	flag.StringVar(&cfg.Service.Schema, "orders-schema", orderservice.DefaultSchema, "PostgreSQL `schema` of the order service's tables")
	flag.StringVar(&cfg.SQLitePath, "sqlite", "", "SQLite `file` of the orders and their outbox, instead of PostgreSQL; the process relays the outbox to --kafka-brokers")
	brokers := flag.String("kafka-brokers", cmp.Or(os.Getenv("OUTBOX_KAFKA_BROKERS"), "127.0.0.1:9092"), "comma-separated Kafka seed `brokers` of the relay, with --sqlite (env OUTBOX_KAFKA_BROKERS)")
	flag.StringVar(&cfg.Listen, "listen", orderservice.DefaultListen, "`host:port` of the HTTP API (port 0 picks a free port)")
	flag.StringVar(&cfg.Service.Topic, "topic", events.TopicOrders, "Kafka `topic` of the order events")
	flag.IntVar(&cfg.Service.PlacedVersion, "order-placed-version", orderservice.DefaultPlacedVersion, "contract version of the OrderPlaced events published: 2, or 1")
	flag.Parse()
	if cfg.SQLitePath != "" {
		cfg.DatabaseURL = "" // --sqlite wins over OUTBOX_DATABASE_URL
	} else if cfg.DatabaseURL == "" {
		fmt.Fprintln(os.Stderr, "orderservice: give --database-url (or OUTBOX_DATABASE_URL) or --sqlite")
		os.Exit(2)
	}
	cfg.Brokers = strings.Split(*brokers, ",")
	cfg.Ready = func(addr string) { fmt.Printf("orders listening on http://%s\n", addr) }

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := orderservice.Run(ctx, cfg); err != nil {
		log.Error("order service failed", slog.Any("error", err))
		os.Exit(1)
	}
}

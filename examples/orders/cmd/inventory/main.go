// Command inventory runs the inventory, a consumer of the reference order
// system, as a process of its own: consumer group "inventory-service",
// one stock reservation per order however often its events arrive, and
// its own events (StockReserved, StockRejected, StockReleased) through its
// outbox; on PostgreSQL, next to 'outbox relay', or on a SQLite file, whose
// outbox it publishes itself.
//
//	go run ./examples/orders/cmd/inventory --database-url postgres://postgres@127.0.0.1:5432/test
//	go run ./examples/orders/cmd/inventory --sqlite inventory.db --kafka-brokers 127.0.0.1:9092
//
// It runs until SIGINT or SIGTERM. 'outbox-lab example inventory' runs the
// same on PostgreSQL.
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
	"github.com/outbox-dev/outbox/examples/orders/inventory"
	"github.com/outbox-dev/outbox/inbox"
	"github.com/outbox-dev/outbox/store/pgstore"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cfg := inventory.RunConfig{Inventory: inventory.Config{Logger: log}}
	flag.StringVar(&cfg.DatabaseURL, "database-url", os.Getenv("OUTBOX_DATABASE_URL"), "PostgreSQL `URL` of the inventory's tables, inbox and outbox (env OUTBOX_DATABASE_URL)")
	flag.StringVar(&cfg.OutboxSchema, "schema", cmp.Or(os.Getenv("OUTBOX_SCHEMA"), pgstore.DefaultSchema), "PostgreSQL `schema` of the outbox, created by 'outbox migrate' (env OUTBOX_SCHEMA)")
	flag.StringVar(&cfg.Inventory.Schema, "inventory-schema", inventory.DefaultSchema, "PostgreSQL `schema` of the inventory's tables")
	flag.StringVar(&cfg.InboxSchema, "inbox-schema", inbox.DefaultSchema, "PostgreSQL `schema` of the inbox")
	flag.StringVar(&cfg.SQLitePath, "sqlite", "", "SQLite `file` of the inventory's tables, inbox and outbox, instead of PostgreSQL; the process relays the outbox")
	brokers := flag.String("kafka-brokers", cmp.Or(os.Getenv("OUTBOX_KAFKA_BROKERS"), "127.0.0.1:9092"), "comma-separated Kafka seed `brokers` (env OUTBOX_KAFKA_BROKERS)")
	topic := flag.String("topic", events.TopicOrders, "Kafka `topic` of the order events to consume")
	flag.StringVar(&cfg.Inventory.Topic, "inventory-topic", events.TopicInventory, "Kafka `topic` of the inventory's own events")
	flag.Parse()
	if cfg.SQLitePath != "" {
		cfg.DatabaseURL = "" // --sqlite wins over OUTBOX_DATABASE_URL
	} else if cfg.DatabaseURL == "" {
		fmt.Fprintln(os.Stderr, "inventory: give --database-url (or OUTBOX_DATABASE_URL) or --sqlite")
		os.Exit(2)
	}
	cfg.Consumer.Brokers, cfg.Consumer.Topics = strings.Split(*brokers, ","), []string{*topic}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := inventory.Run(ctx, cfg); err != nil {
		log.Error("inventory failed", slog.Any("error", err))
		os.Exit(1)
	}
}

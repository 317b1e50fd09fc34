// Command billing runs billing, a consumer of the reference order system,
// as a process of its own: consumer group "billing", one invoice per order
// however often its events arrive, on PostgreSQL or a SQLite file.
//
//	go run ./examples/orders/cmd/billing --database-url postgres://postgres@127.0.0.1:5432/test
//	go run ./examples/orders/cmd/billing --sqlite billing.db --kafka-brokers 127.0.0.1:9092
//
// It runs until SIGINT or SIGTERM. 'outbox-lab example billing' runs the
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

	"github.com/outbox-dev/outbox/examples/orders/billing"
	"github.com/outbox-dev/outbox/examples/orders/events"
	"github.com/outbox-dev/outbox/inbox"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cfg := billing.RunConfig{Billing: billing.Config{Logger: log}}
	flag.StringVar(&cfg.DatabaseURL, "database-url", os.Getenv("OUTBOX_DATABASE_URL"), "PostgreSQL `URL` of billing's tables and inbox (env OUTBOX_DATABASE_URL)")
	flag.StringVar(&cfg.Billing.Schema, "billing-schema", billing.DefaultSchema, "PostgreSQL `schema` of billing's tables")
	flag.StringVar(&cfg.InboxSchema, "inbox-schema", inbox.DefaultSchema, "PostgreSQL `schema` of the inbox")
	flag.StringVar(&cfg.SQLitePath, "sqlite", "", "SQLite `file` of billing's tables and inbox, instead of PostgreSQL")
	brokers := flag.String("kafka-brokers", cmp.Or(os.Getenv("OUTBOX_KAFKA_BROKERS"), "127.0.0.1:9092"), "comma-separated Kafka seed `brokers` (env OUTBOX_KAFKA_BROKERS)")
	topic := flag.String("topic", events.TopicOrders, "Kafka `topic` of the order events")
	flag.Parse()
	if cfg.SQLitePath != "" {
		cfg.DatabaseURL = "" // --sqlite wins over OUTBOX_DATABASE_URL
	} else if cfg.DatabaseURL == "" {
		fmt.Fprintln(os.Stderr, "billing: give --database-url (or OUTBOX_DATABASE_URL) or --sqlite")
		os.Exit(2)
	}
	cfg.Consumer.Brokers, cfg.Consumer.Topics = strings.Split(*brokers, ","), []string{*topic}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := billing.Run(ctx, cfg); err != nil {
		log.Error("billing failed", slog.Any("error", err))
		os.Exit(1)
	}
}

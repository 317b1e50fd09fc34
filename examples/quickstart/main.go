// Command quickstart is the outbox pattern in one file, on PostgreSQL and
// Kafka. POST /orders writes an order and its OrderPlaced event in one
// transaction; the relay, in the same process, publishes the event to the
// topic "orders"; a consumer applies it once through the inbox, writing an
// invoice. Its tables (outbox, inbox, orders, invoices) live in the schema
// "quickstart", which it creates at start.
//
// Start the development broker (it creates topics on first use), then this
// program, then place an order; the log shows the event published and
// applied once:
//
//	go run ./cmd/outbox broker
//	go run ./examples/quickstart
//	curl -X POST localhost:8080/orders -d '{"id":"o-1","amountCents":1250}'
//
// Flags: -database-url (or OUTBOX_DATABASE_URL, DATABASE_URL), -brokers,
// -listen, -schema. SIGINT or SIGTERM stops it cleanly.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/consumer"
	"github.com/outbox-dev/outbox/inbox"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/sink/kafka"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// config is what the flags set.
type config struct {
	DatabaseURL string
	Brokers     []string // Kafka seed brokers
	Listen      string   // the HTTP address
	Schema      string   // holds every table of the quickstart
	Logger      *slog.Logger
}

func main() {
	cfg := config{Logger: slog.Default()}
	dbURL := cmp.Or(os.Getenv("OUTBOX_DATABASE_URL"), os.Getenv("DATABASE_URL"), "postgres://postgres@127.0.0.1:5432/test")
	flag.StringVar(&cfg.DatabaseURL, "database-url", dbURL, "PostgreSQL URL (env OUTBOX_DATABASE_URL or DATABASE_URL)")
	brokers := flag.String("brokers", "127.0.0.1:9092", "comma-separated Kafka seed brokers")
	flag.StringVar(&cfg.Listen, "listen", "127.0.0.1:8080", "HTTP listen address")
	flag.StringVar(&cfg.Schema, "schema", "quickstart", "PostgreSQL schema of all the tables")
	flag.Parse()
	cfg.Brokers = strings.Split(*brokers, ",")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() { <-ctx.Done(); stop() }() // a second Ctrl-C ends the process at once
	if err := run(ctx, cfg); err != nil {
		cfg.Logger.Error("quickstart failed", slog.Any("error", err))
		os.Exit(1)
	}
}

// tables are the quickstart's own. An invoice has no unique order id: the
// inbox alone makes sure that an event redelivered writes no second one.
const tables = `
CREATE TABLE IF NOT EXISTS orders (id text PRIMARY KEY, amount_cents bigint NOT NULL);
CREATE TABLE IF NOT EXISTS invoices (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	order_id text NOT NULL, amount_cents bigint NOT NULL);`

// run sets up the tables, the relay and the consumer, and serves until ctx
// ends (see serve).
func run(ctx context.Context, cfg config) error {
	log := cfg.Logger
	pcfg, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return err
	}
	pcfg.ConnConfig.RuntimeParams["search_path"] = cfg.Schema
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	st, err := pgstore.New(pool, pgstore.Config{Schema: cfg.Schema, Logger: log})
	if err != nil {
		return err
	}
	ib, err := inbox.New(pool, inbox.Config{Schema: cfg.Schema, Logger: log})
	if err != nil {
		return err
	}
	if err := errors.Join(st.Migrate(ctx), ib.Migrate(ctx)); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, tables); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}

	// readme:relay
	snk, err := kafka.New(kafka.Config{ // idempotent, acks from all replicas, no topic auto-creation
		Brokers:              cfg.Brokers,
		TopicByAggregateType: map[string]string{"Order": "orders"},
	})
	if err != nil {
		return err
	}
	defer snk.Close()
	published := func(rec outbox.Record, _ time.Duration) {
		log.Info("event published", slog.String("event", rec.EventType), slog.String("order", rec.AggregateID))
	}
	r, err := relay.New(relay.Config{Store: st, Sink: snk, Logger: log, Hooks: relay.Hooks{Published: published}})
	if err != nil {
		return err
	}
	if err := r.Start(context.WithoutCancel(ctx)); err != nil { // stopped after the HTTP server
		return err
	}
	// readme:end

	// readme:consume
	c, err := consumer.New(consumer.Config{
		Brokers: cfg.Brokers, Group: "billing", Topics: []string{"orders"}, Logger: log,
		Inbox: ib, // applies each event once, however often Kafka delivers it
		Handler: func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
			var o order
			if err := json.Unmarshal(m.Payload, &o); err != nil {
				return fmt.Errorf("%s payload: %v: %w", m.EventType, err, inbox.ErrPermanent) // parked, not retried
			}
			_, err := tx.Exec(ctx, "INSERT INTO invoices (order_id, amount_cents) VALUES ($1, $2)", o.ID, o.AmountCents)
			return err
		},
		Hooks: consumer.Hooks{Handled: func(m inbox.Message, res inbox.Result, _ time.Duration) {
			log.Info("event handled", slog.String("order", m.AggregateID), slog.String("result", res.String())) // processed or duplicate
		}},
	})
	if err != nil {
		return err
	}
	// readme:end
	log.Info("listening", slog.String("addr", ln.Addr().String()))
	return serve(ctx, ln, placeOrder(pool, st, log), r, c)
}

// serve serves POST /orders on ln and consumes until ctx ends or the relay
// or the consumer stops on its own; then it stops the HTTP server, the
// consumer and last the relay, which publishes what the server committed.
func serve(ctx context.Context, ln net.Listener, place http.Handler, r *relay.Relay, c *consumer.Runner) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { <-r.Stopped(); cancel() }() // the relay stopped on its own: stop the rest
	consumed := make(chan error, 1)
	go func() { defer cancel(); consumed <- c.Run(ctx) }() // returns once ctx ends

	mux := http.NewServeMux()
	mux.Handle("POST /orders", place)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	<-ctx.Done()

	shutCtx, done := context.WithTimeout(context.Background(), 30*time.Second)
	defer done()
	err := srv.Shutdown(shutCtx)
	if serveErr := <-served; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return errors.Join(err, <-consumed, r.Stop(shutCtx)) // Stop: the relay's own cause, if any
}

// order is the body of POST /orders and the payload of OrderPlaced.
type order struct {
	ID          string `json:"id"`
	AmountCents int64  `json:"amountCents"`
}

var errOrderExists = errors.New("order exists")

// placeOrder is POST /orders: 201 once the order and its event committed,
// 400 for a bad body, 409 for an order id taken; no event then.
func placeOrder(pool *pgxpool.Pool, st *pgstore.Store, log *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		var o order
		if err := json.NewDecoder(http.MaxBytesReader(w, req.Body, 1<<16)).Decode(&o); err != nil || o.ID == "" || o.AmountCents <= 0 {
			http.Error(w, `want {"id":"o-1","amountCents":1250}`, http.StatusBadRequest)
			return
		}
		payload, _ := json.Marshal(o)
		ctx := req.Context()
		// readme:enqueue
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, "INSERT INTO orders (id, amount_cents) VALUES ($1, $2) ON CONFLICT DO NOTHING", o.ID, o.AmountCents)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				return errOrderExists // rolls back: no event either
			}
			// Committed with the order, or rolled back with it.
			return st.Enqueue(ctx, tx, outbox.Message{
				AggregateType: "Order", AggregateID: o.ID,
				EventType: "OrderPlaced", Payload: payload,
			})
		})
		// readme:end
		switch {
		case errors.Is(err, errOrderExists):
			http.Error(w, err.Error(), http.StatusConflict)
		case err != nil:
			log.Error("placing an order failed", slog.String("order", o.ID), slog.Any("error", err))
			http.Error(w, "internal error", http.StatusInternalServerError)
		default:
			log.Info("order placed", slog.String("order", o.ID))
			w.WriteHeader(http.StatusCreated)
		}
	}
}

package inbox_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox/consumer"
	"github.com/outbox-dev/outbox/inbox"
	"github.com/outbox-dev/outbox/store/sqlitestore"
)

func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://billing@localhost:5432/billing")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	ib, err := inbox.New(pool, inbox.Config{
		Schema:    "inbox",
		Retention: 30 * 24 * time.Hour, // longer than the topic's retention.ms
	})
	if err != nil {
		log.Fatal(err)
	}
	// Create or update the tables; safe to run from every instance at start-up.
	if err := ib.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
}

// A consumer on SQLite: the inbox lives in the service's own database file,
// next to its business tables (and its outbox, if it has one), all on the
// one *sql.DB from sqlitestore.Open.
func ExampleNewSQLite() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "billing")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sqlitestore.Open(ctx, filepath.Join(dir, "billing.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	ib, err := inbox.NewSQLite(db, inbox.SQLiteConfig{
		Retention: 30 * 24 * time.Hour, // longer than the topic's retention.ms
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := ib.Migrate(ctx); err != nil { // tables inbox_processed, inbox_parked, inbox_migrations
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE invoices (order_id TEXT PRIMARY KEY, amount TEXT NOT NULL)"); err != nil {
		log.Fatal(err)
	}

	invoice := func(ctx context.Context, tx *sql.Tx, m inbox.Message) error {
		var order struct {
			OrderID string `json:"orderId"`
			Amount  string `json:"amount"`
		}
		if err := json.Unmarshal(m.Payload, &order); err != nil {
			return fmt.Errorf("OrderPlaced payload: %v: %w", err, inbox.ErrPermanent)
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO invoices (order_id, amount) VALUES (?, ?)", order.OrderID, order.Amount)
		return err
	}
	msg := inbox.Message{ // from inbox.FromRecord(record)
		ID: uuid.MustParse("0190a5f2-7c3e-7d4a-9b1e-2f3a4b5c6d7e"), EventType: "OrderPlaced",
		Payload: []byte(`{"orderId":"o-1","amount":"150.00"}`),
	}
	for range 2 { // delivered twice
		res, err := ib.Handle(ctx, "billing", msg, invoice)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(res)
	}
	// consumer.Config{Applier: ib.Bind(invoice), ...} runs it for a Kafka group.

	// Output:
	// processed
	// duplicate
}

// Apply an OrderPlaced event once: the invoice and the inbox record commit
// together.
func ExampleInbox_Handle() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, "postgres://billing@localhost:5432/billing")
	ib, _ := inbox.New(pool, inbox.Config{})

	var msg inbox.Message // from inbox.FromRecord(record)
	res, err := ib.Handle(ctx, "billing", msg, func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		var order struct {
			OrderID string `json:"orderId"`
			Amount  string `json:"amount"`
		}
		if err := json.Unmarshal(m.Payload, &order); err != nil {
			return fmt.Errorf("OrderPlaced payload: %v: %w", err, inbox.ErrPermanent) // retrying cannot help
		}
		_, err := tx.Exec(ctx, "INSERT INTO invoices (order_id, amount) VALUES ($1, $2)", order.OrderID, order.Amount)
		return err
	})
	switch {
	case err != nil:
		log.Printf("not applied, deliver again: %v", err)
	case res == inbox.Duplicate:
		log.Printf("message %s was applied before", msg.ID)
	}
}

// Replay the parked messages of a consumer after the handler was fixed.
func ExampleInbox_Replay() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, "postgres://billing@localhost:5432/billing")
	ib, _ := inbox.New(pool, inbox.Config{})
	var handler inbox.HandlerFunc // the fixed handler

	parked, err := ib.Parked(ctx, inbox.ParkedFilter{Consumer: "billing", EventType: "OrderPlaced"})
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range parked {
		res, err := ib.Replay(ctx, "billing", p.ID, handler)
		if err != nil {
			log.Printf("parked %s (offset %d) still fails: %v", p.ID, p.Message.Offset, err)
			continue
		}
		log.Printf("parked %s: %s", p.ID, res) // processed, or duplicate if applied meanwhile
	}
}

func ExampleFromRecord() {
	r := &kgo.Record{
		Topic: "orders", Partition: 0, Offset: 17,
		Key:   []byte("o-1"),
		Value: []byte(`{"orderId":"o-1","amount":"150.00"}`),
		Headers: []kgo.RecordHeader{
			{Key: "eventId", Value: []byte("0190a5f2-7c3e-7d4a-9b1e-2f3a4b5c6d7e")},
			{Key: "eventType", Value: []byte("OrderPlaced")},
			{Key: "aggregateType", Value: []byte("Order")},
		},
	}
	m, err := inbox.FromRecord(r)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(m.ID, m.EventType, m.EventVersion, m.AggregateType, m.AggregateID)

	r.Headers[0].Value = []byte("42")
	_, err = inbox.FromRecord(r)
	fmt.Println(errors.Is(err, inbox.ErrMalformed))
	// Output:
	// 0190a5f2-7c3e-7d4a-9b1e-2f3a4b5c6d7e OrderPlaced 1 Order o-1
	// true
}

func ExampleResult_String() {
	fmt.Println(inbox.Processed, inbox.Duplicate)
	// Output: processed duplicate
}

// Bind gives a consumer runner the inbox and its handler as one value,
// consumer.Config.Applier. For PostgreSQL, consumer.Config{Inbox: ib,
// Handler: invoice} is the same.
func ExampleInbox_Bind() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, "postgres://billing@localhost:5432/billing")
	ib, _ := inbox.New(pool, inbox.Config{})
	invoice := func(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
		_, err := tx.Exec(ctx, "INSERT INTO invoices (order_id) VALUES ($1)", m.AggregateID)
		return err
	}

	r, err := consumer.New(consumer.Config{
		Brokers: []string{"localhost:9092"},
		Group:   "billing",
		Topics:  []string{"orders"},
		Applier: ib.Bind(invoice),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := r.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

// A consumer on SQLite binds its handler to the inbox; the runner calls
// Apply for each record, and a record delivered again is a duplicate.
func ExampleSQLiteInbox_Bind() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "billing")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := sqlitestore.Open(ctx, filepath.Join(dir, "billing.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ib, err := inbox.NewSQLite(db, inbox.SQLiteConfig{})
	if err != nil {
		log.Fatal(err)
	}
	if err := ib.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE invoices (order_id TEXT NOT NULL)"); err != nil {
		log.Fatal(err)
	}

	bound := ib.Bind(func(ctx context.Context, tx *sql.Tx, m inbox.Message) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO invoices (order_id) VALUES (?)", m.AggregateID)
		return err
	})
	// consumer.New(consumer.Config{Applier: bound, ...}) runs it for a Kafka group.
	msg := inbox.Message{ID: uuid.MustParse("0190a5f2-7c3e-7d4a-9b1e-2f3a4b5c6d7e"), EventType: "OrderPlaced", AggregateID: "o-1"}
	for range 2 { // delivered twice
		res, err := bound.Apply(ctx, "billing", msg)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(res)
	}
	var invoices int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM invoices").Scan(&invoices); err != nil {
		log.Fatal(err)
	}
	fmt.Println(invoices, "invoice")
	// Output:
	// processed
	// duplicate
	// 1 invoice
}

// A consumer on PostgreSQL whose handler takes a *sql.Tx, as it would on
// SQLite: SQL gives the inbox's database/sql face, on the inbox's pool.
func ExampleInbox_SQL() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, "postgres://billing@localhost:5432/billing")
	ib, _ := inbox.New(pool, inbox.Config{})

	invoice := func(ctx context.Context, tx *sql.Tx, m inbox.Message) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO invoices (order_id) VALUES ($1)", m.AggregateID)
		return err // the invoice and the record of m commit together
	}
	var msg inbox.Message // from inbox.FromRecord(record)
	res, err := ib.SQL().Handle(ctx, "billing", msg, invoice)
	if err != nil {
		log.Printf("not applied, deliver again: %v", err)
	}
	log.Print(res) // processed, or duplicate if applied before

	// consumer.Config{Applier: ib.SQL().Bind(invoice), ...} runs it for a Kafka group.
}

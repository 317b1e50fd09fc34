package pgstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@localhost:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	s, err := pgstore.New(pool, pgstore.Config{Schema: "outbox"})
	if err != nil {
		log.Fatal(err)
	}
	// Create or update the tables; safe to run from every instance at start-up.
	if err := s.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
}

func ExampleStore_Enqueue() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, "postgres://app@localhost:5432/app")
	s, _ := pgstore.New(pool, pgstore.Config{})

	// The order and its event commit together, or neither does.
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO orders (id, total) VALUES ($1, $2)", "o-1", 4200); err != nil {
			return err
		}
		return s.Enqueue(ctx, tx, outbox.Message{
			AggregateType: "Order",
			AggregateID:   "o-1",
			EventType:     "OrderPlaced",
			Payload:       []byte(`{"orderId":"o-1","total":4200}`),
		})
	})
	var invalid *outbox.ValidationError
	if errors.As(err, &invalid) {
		log.Printf("message %d: %s %s", invalid.Index, invalid.Field, invalid.Rule)
	}
}

func ExampleStore_SQL() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, "postgres://app@localhost:5432/app")
	s, _ := pgstore.New(pool, pgstore.Config{})

	// database/sql with the pgx driver.
	db, err := sql.Open("pgx", "postgres://app@localhost:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback() // gone unless committed
	if err := s.SQL().Enqueue(ctx, tx, outbox.Message{
		AggregateType: "Order",
		AggregateID:   "o-1",
		EventType:     "OrderShipped",
		Payload:       []byte(`{"orderId":"o-1"}`),
	}); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
}

func ExampleStore_Claim() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, "postgres://app@localhost:5432/app")
	s, _ := pgstore.New(pool, pgstore.Config{})

	c, err := s.Claim(ctx, store.ClaimParams{Owner: "relay-1", Limit: 100, Lease: 30 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	var sent []int64
	for _, r := range c.Records {
		fmt.Println("publish", r.ID, r.AggregateID, r.EventType)
		sent = append(sent, r.Seq)
	}
	// Only this claim's token can mark them; after a takeover it changes nothing.
	if _, err := s.MarkSent(ctx, c.Token, sent); err != nil {
		log.Fatal(err)
	}
}

func ExampleStore_Notifications() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool, _ := pgxpool.New(ctx, "postgres://app@localhost:5432/app")
	s, _ := pgstore.New(pool, pgstore.Config{})

	wake, err := s.Notifications(ctx)
	if err != nil {
		log.Fatal(err)
	}
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	for {
		select {
		case <-wake: // a transaction with messages committed
		case <-poll.C: // notifications can be lost; poll as well
		case <-ctx.Done():
			return
		}
		// claim and publish ...
	}
}

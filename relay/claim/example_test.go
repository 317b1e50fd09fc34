package claim_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/relay/claim"
	"github.com/outbox-dev/outbox/store/sqlitestore"
)

// printSink prints what it publishes and closes published after the first
// batch.
type printSink struct {
	once      sync.Once
	published chan struct{}
}

func (s *printSink) Publish(_ context.Context, recs []outbox.Record) []error {
	for _, r := range recs {
		fmt.Println("published", r.EventType, "of", r.AggregateID)
	}
	s.once.Do(func() { close(s.published) })
	return make([]error, len(recs))
}

func (s *printSink) Close() error { return nil }

// A relay runs the claim strategy over a store (relay.Config.Store is
// short for it). Any number of relays may run it over the same outbox:
// each claims due messages and marks them, and they share the work.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "outbox-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	db, err := sqlitestore.Open(ctx, filepath.Join(dir, "orders.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	quiet := slog.New(slog.DiscardHandler)
	st, err := sqlitestore.New(db, sqlitestore.Config{Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := st.Migrate(ctx); err != nil {
		fmt.Println(err)
		return
	}
	if err := enqueue(ctx, db, st, outbox.Message{AggregateType: "Order", AggregateID: "order-42",
		EventType: "OrderPlaced", Payload: []byte(`{"orderId":"order-42"}`)}); err != nil {
		fmt.Println(err)
		return
	}

	snk := &printSink{published: make(chan struct{})}
	r, err := relay.New(relay.Config{Strategy: claim.New(st), Sink: snk,
		PollInterval: sqlitestore.PollInterval, Logger: quiet})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := r.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	<-snk.published
	if err := r.Stop(ctx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// published OrderPlaced of order-42
}

// enqueue commits msg in a transaction of its own (an application enqueues
// with its business rows).
func enqueue(ctx context.Context, db *sql.DB, st *sqlitestore.Store, msg outbox.Message) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	if err := st.Enqueue(ctx, tx, msg); err != nil {
		return err
	}
	return tx.Commit()
}

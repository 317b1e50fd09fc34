package sqlitestore_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/sqlitestore"
)

// An order service on SQLite writes the order and its event in one
// transaction; the relay's side claims the event and marks it sent.
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
	st, err := sqlitestore.New(db, sqlitestore.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := st.Migrate(ctx); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY, total TEXT NOT NULL)`); err != nil {
		fmt.Println(err)
		return
	}

	// The application: the business row and its event commit together.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tx.Rollback() // a no-op after Commit
	if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, total) VALUES (?, ?)`, "order-42", "150.00"); err != nil {
		fmt.Println(err)
		return
	}
	err = st.Enqueue(ctx, tx, outbox.Message{
		AggregateType: "Order",
		AggregateID:   "order-42",
		EventType:     "OrderPlaced",
		Payload:       []byte(`{"orderId":"order-42","total":"150.00"}`),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := tx.Commit(); err != nil {
		fmt.Println(err)
		return
	}

	// The relay (relay.New with this store and PollInterval:
	// sqlitestore.PollInterval) does this in a loop.
	c, err := st.Claim(ctx, store.ClaimParams{Owner: "relay-1", Limit: 100, Lease: 30 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range c.Records {
		fmt.Println("publish", r.AggregateID, r.EventType, string(r.Payload))
	}
	n, err := st.MarkSent(ctx, c.Token, []int64{c.Records[0].Seq})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("marked sent:", n)

	counts, err := st.Counts(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("pending:", counts[outbox.StatusPending], "sent:", counts[outbox.StatusSent])
	// Output:
	// publish order-42 OrderPlaced {"orderId":"order-42","total":"150.00"}
	// marked sent: 1
	// pending: 0 sent: 1
}

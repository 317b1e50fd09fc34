package outbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/sqlitestore"
)

// placeOrder is application code written once against database/sql: it
// runs on PostgreSQL (db opened with pgx's stdlib driver, ob the
// pgstore.Store's SQL()) and on SQLite (db from sqlitestore.Open, ob the
// *sqlitestore.Store). The order and its event commit together or not at
// all.
func placeOrder(ctx context.Context, db *sql.DB, ob outbox.Enqueuer[*sql.Tx], orderID string, cents int64) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // does nothing after Commit
	if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id, total_cents) VALUES ($1, $2)", orderID, cents); err != nil {
		return err
	}
	err = ob.Enqueue(ctx, tx, outbox.Message{
		AggregateType: "Order",
		AggregateID:   orderID,
		EventType:     "OrderPlaced",
		Payload:       fmt.Appendf(nil, `{"orderId":%q,"totalCents":%d}`, orderID, cents),
	})
	if err != nil {
		return err
	}
	return tx.Commit()
}

// The same placeOrder runs here on SQLite; on PostgreSQL it takes a
// database/sql DB opened with pgx's driver and pgstore's Store.SQL().
func ExampleEnqueuer() {
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
	if _, err := db.ExecContext(ctx, "CREATE TABLE orders (id TEXT PRIMARY KEY, total_cents INTEGER NOT NULL)"); err != nil {
		fmt.Println(err)
		return
	}

	if err := placeOrder(ctx, db, st, "order-42", 1250); err != nil {
		fmt.Println(err)
		return
	}

	c, err := st.Claim(ctx, store.ClaimParams{Owner: "example", Limit: 10, Lease: time.Minute})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range c.Records {
		fmt.Println(r.AggregateID, r.EventType, string(r.Payload))
	}
	// Output:
	// order-42 OrderPlaced {"orderId":"order-42","totalCents":1250}
}

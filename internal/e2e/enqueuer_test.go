package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
	"github.com/outbox-dev/outbox/store/sqlitestore"
)

// errDecline makes a transaction roll back on purpose.
var errDecline = errors.New("order declined")

// enqueuePlaced is the application's enqueue, written once for every
// store: generic in the transaction type of the database driver.
func enqueuePlaced[Tx any](ctx context.Context, ob outbox.Enqueuer[Tx], tx Tx, orderID string) error {
	return ob.Enqueue(ctx, tx, outbox.Message{
		AggregateType: "Order",
		AggregateID:   orderID,
		EventType:     "OrderPlaced",
		Payload:       fmt.Appendf(nil, `{"orderId":%q}`, orderID),
	})
}

// placeOrderSQL is application code written once against database/sql,
// for PostgreSQL and SQLite: the order row and its event in one
// transaction, rolled back when decline is set.
func placeOrderSQL(ctx context.Context, db *sql.DB, ob outbox.Enqueuer[*sql.Tx], orderID string, decline bool) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // does nothing after Commit
	if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id) VALUES ($1)", orderID); err != nil {
		return err
	}
	if err := enqueuePlaced(ctx, ob, tx, orderID); err != nil {
		return err
	}
	if decline {
		return errDecline
	}
	return tx.Commit()
}

// placeOrderPgx is the same with pgx.
func placeOrderPgx(ctx context.Context, st *pgstore.Store, tx pgx.Tx, orderID string) error {
	if _, err := tx.Exec(ctx, "INSERT INTO orders (id) VALUES ($1)", orderID); err != nil {
		return err
	}
	return enqueuePlaced[pgx.Tx](ctx, st, tx, orderID)
}

// TestEnqueuer_WrittenOnceRunsOnEveryStore runs the same application code
// on PostgreSQL with pgx, PostgreSQL with database/sql and SQLite: a
// committed order has its event in the outbox, a declined one (rolled
// back) has neither row nor event.
func TestEnqueuer_WrittenOnceRunsOnEveryStore(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T) (place func(ctx context.Context, id string, decline bool) error, db *sql.DB, q store.Queue)
	}{
		{"postgres-pgx", pgxStore},
		{"postgres-database-sql", pgSQLStore},
		{"sqlite", sqliteStore},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			place, db, q := tc.setup(t)
			if err := place(ctx, "order-1", false); err != nil {
				t.Fatalf("place a committed order: %v", err)
			}
			if err := place(ctx, "order-2", true); !errors.Is(err, errDecline) {
				t.Fatalf("place a declined order: %v, want %v", err, errDecline)
			}
			assertOrders(ctx, t, db, "order-1")
			assertOutbox(ctx, t, q, "order-1")
		})
	}
}

// assertOrders fails t unless the orders table holds exactly want.
func assertOrders(ctx context.Context, t *testing.T, db *sql.DB, want string) {
	t.Helper()
	var n int
	var id string
	if err := db.QueryRowContext(ctx, "SELECT count(*), max(id) FROM orders").Scan(&n, &id); err != nil {
		t.Fatal(err)
	}
	if n != 1 || id != want {
		t.Errorf("orders: %d rows (last %q), want only %q", n, id, want)
	}
}

// assertOutbox fails t unless the outbox holds exactly one message, the
// event of order want.
func assertOutbox(ctx context.Context, t *testing.T, q store.Queue, want string) {
	t.Helper()
	c, err := q.Claim(ctx, store.ClaimParams{Owner: "test", Limit: 10, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Records) != 1 || c.Records[0].AggregateID != want || c.Records[0].EventType != "OrderPlaced" {
		t.Errorf("outbox holds %+v, want one OrderPlaced of %s", c.Records, want)
	}
}

func pgxStore(t *testing.T) (func(context.Context, string, bool) error, *sql.DB, store.Queue) {
	st, pool, db := pgOrders(t)
	place := func(ctx context.Context, id string, decline bool) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if err := placeOrderPgx(ctx, st, tx, id); err != nil {
				return err
			}
			if decline {
				return errDecline
			}
			return nil
		})
	}
	return place, db, st
}

func pgSQLStore(t *testing.T) (func(context.Context, string, bool) error, *sql.DB, store.Queue) {
	st, _, db := pgOrders(t)
	place := func(ctx context.Context, id string, decline bool) error {
		return placeOrderSQL(ctx, db, st.SQL(), id, decline)
	}
	return place, db, st
}

// pgOrders gives a migrated pgstore in a schema of its own with an orders
// table, its pool and a database/sql DB over that pool.
func pgOrders(t *testing.T) (*pgstore.Store, *pgxpool.Pool, *sql.DB) {
	ctx := context.Background()
	pool, schema := pgtest.Schema(t)
	st, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE orders (id text PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { db.Close() })
	return st, pool, db
}

func sqliteStore(t *testing.T) (func(context.Context, string, bool) error, *sql.DB, store.Queue) {
	ctx := context.Background()
	db, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "orders.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st, err := sqlitestore.New(db, sqlitestore.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE orders (id TEXT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	place := func(ctx context.Context, id string, decline bool) error {
		return placeOrderSQL(ctx, db, st, id, decline)
	}
	return place, db, st
}

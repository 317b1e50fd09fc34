package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/inbox"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/sqlitestore"
)

// Handle tells a duplicate by the driver's extended result code: this
// checks that the driver reports it, as a handler's own primary key
// violation shows.
func TestSQLiteHandle_DriverReportsThePrimaryKeyViolationByCode(t *testing.T) {
	t.Parallel()
	ib := setupSQLite(t, targetConfig{})
	ctx := testCtx(t)
	invoice := func(_ context.Context, m inbox.Message, tx effectWriter) error { return tx.invoice(m.AggregateID) }
	if _, err := ib.handle(ctx, "billing", msg(), invoice); err != nil {
		t.Fatal(err)
	}
	_, err := ib.handle(ctx, "billing", msg(), invoice) // the same order again
	var sqliteErr *sqlite.Error
	if !errors.As(err, &sqliteErr) || sqliteErr.Code() != sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY {
		t.Fatalf("handler error = %v, want a *sqlite.Error with code SQLITE_CONSTRAINT_PRIMARYKEY", err)
	}
}

// The inventory pattern on one SQLite file: the handler applies the event
// and enqueues its own event into the outbox in the same transaction, while
// the application writes and a relay claims, all on one *sql.DB. Every
// delivery comes twice; nothing fails with "database is locked", and each
// event has exactly one effect and one outgoing message.
func TestSQLiteInbox_SharesOneDatabaseWithTheOutboxUnderLoad(t *testing.T) {
	t.Parallel()
	// A generous bound: the machine may be loaded by other tests, and the
	// assertions are about outcomes, not speed.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := openSQLite(t, filepath.Join(t.TempDir(), "app.db"))
	st, err := sqlitestore.New(db, sqlitestore.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ib, err := inbox.NewSQLite(db, inbox.SQLiteConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ib.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE reservations (order_id TEXT PRIMARY KEY) STRICT"); err != nil {
		t.Fatal(err)
	}
	reserve := func(ctx context.Context, tx *sql.Tx, m inbox.Message) error {
		if _, err := tx.ExecContext(ctx, "INSERT INTO reservations (order_id) VALUES (?)", m.AggregateID); err != nil {
			return err
		}
		return st.Enqueue(ctx, tx, outbox.Message{AggregateType: "Order", AggregateID: m.AggregateID,
			EventType: "StockReserved", Payload: []byte(`{}`)})
	}

	const consumers, perConsumer, appWriters, perWriter = 4, 25, 2, 25
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		errs   []error
		counts = map[inbox.Result]int{}
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}
	for c := range consumers {
		wg.Go(func() {
			for n := range perConsumer {
				m := msg()
				m.AggregateID = fmt.Sprintf("o-%d-%d", c, n)
				for range 2 {
					res, err := ib.Handle(ctx, "inventory", m, reserve)
					if err != nil {
						fail(fmt.Errorf("Handle: %w", err))
						return
					}
					mu.Lock()
					counts[res]++
					mu.Unlock()
				}
			}
		})
	}
	for range appWriters {
		wg.Go(func() {
			for range perWriter {
				err := func() error {
					tx, err := db.BeginTx(ctx, nil)
					if err != nil {
						return err
					}
					defer tx.Rollback()
					if err := st.Enqueue(ctx, tx, outbox.Message{AggregateType: "Order", AggregateID: uuid.NewString(),
						EventType: "OrderPlaced", Payload: []byte(`{}`)}); err != nil {
						return err
					}
					return tx.Commit()
				}()
				if err != nil {
					fail(fmt.Errorf("application write: %w", err))
					return
				}
			}
		})
	}
	// The relay claims and marks until the writers are done and nothing
	// is left: until a claim that began after the last commit finds
	// nothing (one that began before it may miss the last messages).
	writersDone, relayDone := make(chan struct{}), make(chan struct{})
	var claimed int
	go func() {
		defer close(relayDone)
		for {
			finished := false
			select {
			case <-writersDone:
				finished = true
			default:
			}
			c, err := st.Claim(ctx, store.ClaimParams{Owner: "relay", Limit: 20, Lease: time.Minute})
			if err != nil {
				fail(fmt.Errorf("claim: %w", err))
				return
			}
			if len(c.Records) == 0 {
				if finished {
					return
				}
				select {
				case <-writersDone:
				case <-time.After(5 * time.Millisecond):
				}
				continue
			}
			seqs := make([]int64, len(c.Records))
			for i, r := range c.Records {
				seqs[i] = r.Seq
			}
			if _, err := st.MarkSent(ctx, c.Token, seqs); err != nil {
				fail(fmt.Errorf("mark sent: %w", err))
				return
			}
			claimed += len(seqs)
		}
	}()
	wg.Wait()
	close(writersDone)
	<-relayDone
	for _, err := range errs {
		t.Error(err)
	}
	if counts[inbox.Processed] != consumers*perConsumer || counts[inbox.Duplicate] != consumers*perConsumer {
		t.Errorf("results %v, want %d processed and as many duplicates", counts, consumers*perConsumer)
	}
	var reservations, reserved int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM reservations").Scan(&reservations); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM outbox_messages WHERE event_type = 'StockReserved'").Scan(&reserved); err != nil {
		t.Fatal(err)
	}
	if want := consumers*perConsumer + appWriters*perWriter; claimed != want {
		t.Errorf("relay claimed %d messages, want %d", claimed, want)
	}
	if reservations != consumers*perConsumer || reserved != consumers*perConsumer {
		t.Errorf("%d reservations and %d StockReserved events, want %d of each", reservations, reserved, consumers*perConsumer)
	}
}

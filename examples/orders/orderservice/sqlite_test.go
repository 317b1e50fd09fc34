package orderservice_test

import (
	"database/sql"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"github.com/outbox-dev/outbox/examples/orders/orderservice"
	"github.com/outbox-dev/outbox/store/sqlitestore"
)

// setupSQLite is setup on a SQLite file: the service's tables and its
// outbox in one database, as in 'outbox-lab demo'.
func setupSQLite(t *testing.T) (*bundle, *sql.DB) {
	t.Helper()
	db, err := sqlitestore.Open(testCtx(t), filepath.Join(t.TempDir(), "orders.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st, err := sqlitestore.New(db, sqlitestore.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	svc, err := orderservice.NewSQLite(db, st, orderservice.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // idempotent
		if err := svc.Migrate(testCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	return &bundle{svc: svc, server: srv}, db
}

// sqliteOutbox returns the SQLite outbox's messages in enqueue order.
func sqliteOutbox(t *testing.T, db *sql.DB) []outboxRow {
	t.Helper()
	rows, err := db.QueryContext(testCtx(t), `SELECT event_type, aggregate_type, aggregate_id, topic, event_version, payload
		FROM outbox_messages ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []outboxRow
	for rows.Next() {
		var (
			r       outboxRow
			payload []byte
		)
		if err := rows.Scan(&r.EventType, &r.AggregateType, &r.AggregateID, &r.Topic, &r.EventVersion, &payload); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(payload, &r.Payload); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSQLite_PlaceWritesTheOrderAndOrderPlacedTogether(t *testing.T) {
	t.Parallel()
	b, db := setupSQLite(t)
	r := b.place(t, `{"customerId":"C-42","amount":"150.00","currency":"EUR","items":[{"sku":"BOOK-1","quantity":2}]}`, "")
	if r.status != http.StatusCreated {
		t.Fatalf("status %d %s; want 201", r.status, r.body)
	}
	var o orderservice.Order
	r.json(t, &o)
	if o.Status != orderservice.StatusPlaced || o.Version != 1 || o.Amount != "150.00" || len(o.Items) != 1 {
		t.Errorf("order %+v", o)
	}
	msgs := sqliteOutbox(t, db)
	if len(msgs) != 1 || msgs[0].EventType != "OrderPlaced" || msgs[0].AggregateID != o.ID.String() || msgs[0].Topic != "orders" {
		t.Fatalf("outbox %+v; want one OrderPlaced of %s", msgs, o.ID)
	}
	total, _ := msgs[0].Payload["total"].(map[string]any)
	if total["amountMinor"] != 15000.0 || total["currency"] != "EUR" {
		t.Errorf("payload %v", msgs[0].Payload)
	}
	// What Place returned is what Get reads back, times included.
	if g := b.do(t, http.MethodGet, "/orders/"+o.ID.String(), ""); g.status != http.StatusOK || string(g.body) != string(r.body) {
		t.Errorf("GET: %d %s\nwant 200 %s", g.status, g.body, r.body)
	}
}

func TestSQLite_BadInputAndInvalidTransitionsWriteNothing(t *testing.T) {
	t.Parallel()
	b, db := setupSQLite(t)
	if r := b.place(t, `{"customerId":"C-1","amount":"1.005","currency":"EUR"}`, ""); r.status != http.StatusBadRequest {
		t.Fatalf("bad amount: %d %s", r.status, r.body)
	}
	o := b.placed(t)
	if r := b.do(t, http.MethodPost, "/orders/"+o.ID.String()+"/ship", ""); r.status != http.StatusConflict {
		t.Errorf("ship a placed order: %d %s; want 409", r.status, r.body)
	}
	if msgs := sqliteOutbox(t, db); len(msgs) != 1 {
		t.Errorf("%d outbox messages; want only the OrderPlaced", len(msgs))
	}
}

func TestSQLite_LifecycleWritesEachEventWithTheNextVersion(t *testing.T) {
	t.Parallel()
	b, db := setupSQLite(t)
	o := b.placed(t)
	for _, action := range []string{"pay", "ship"} {
		if r := b.do(t, http.MethodPost, "/orders/"+o.ID.String()+"/"+action, ""); r.status != http.StatusOK {
			t.Fatalf("%s: %d %s", action, r.status, r.body)
		}
	}
	msgs := sqliteOutbox(t, db)
	want := []string{"OrderPlaced", "OrderPaid", "OrderShipped"}
	if len(msgs) != len(want) {
		t.Fatalf("outbox %+v", msgs)
	}
	for i, m := range msgs {
		if m.EventType != want[i] || m.Payload["version"] != float64(i+1) {
			t.Errorf("message %d: %s version %v; want %s version %d", i, m.EventType, m.Payload["version"], want[i], i+1)
		}
	}
}

func TestSQLite_ConcurrentRetriesWithOneKeyPlaceOneOrder(t *testing.T) {
	t.Parallel()
	b, db := setupSQLite(t)
	const n = 8
	bodies := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r := b.place(t, `{"customerId":"C-1","amount":"5.00","currency":"EUR"}`, "same-key")
			if r.status != http.StatusCreated {
				t.Errorf("%d %s", r.status, r.body)
			}
			bodies[i] = string(r.body)
		})
	}
	wg.Wait()
	for i := range bodies {
		if bodies[i] != bodies[0] {
			t.Fatalf("answers differ:\n%s\n%s", bodies[0], bodies[i])
		}
	}
	if msgs := sqliteOutbox(t, db); len(msgs) != 1 {
		t.Errorf("%d OrderPlaced events; want 1", len(msgs))
	}
}

func TestSQLite_ConcurrentActionsOnOneOrderKeepItsEventsInVersionOrder(t *testing.T) {
	t.Parallel()
	b, db := setupSQLite(t)
	o := b.placed(t)
	var wg sync.WaitGroup
	for _, action := range []string{"pay", "cancel", "pay", "cancel"} {
		wg.Go(func() { b.do(t, http.MethodPost, "/orders/"+o.ID.String()+"/"+action, "") })
	}
	wg.Wait()
	for i, m := range sqliteOutbox(t, db) {
		if m.Payload["version"] != float64(i+1) {
			t.Errorf("message %d (%s) has version %v; want %d", i, m.EventType, m.Payload["version"], i+1)
		}
	}
}

func TestNewSQLite_NamesTheBadField(t *testing.T) {
	t.Parallel()
	_, err := orderservice.NewSQLite(nil, nil, orderservice.Config{})
	if err == nil {
		t.Fatal("NewSQLite(nil, nil) succeeded")
	}
}

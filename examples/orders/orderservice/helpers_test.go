package orderservice_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/outbox-dev/outbox/examples/orders/orderservice"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// bundle is a running service over its own schema, which holds both the
// service's tables and the outbox.
type bundle struct {
	pool   *pgxpool.Pool
	schema string
	svc    *orderservice.Service
	server *httptest.Server
}

func setup(t *testing.T, edit ...func(*orderservice.Config)) *bundle {
	t.Helper()
	pool, schema := pgtest.Schema(t)
	st, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	cfg := orderservice.Config{Schema: schema, Logger: slog.New(slog.DiscardHandler)}
	for _, e := range edit {
		e(&cfg)
	}
	svc, err := orderservice.New(sqlDB(t, pool), st.SQL(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Migrate(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	return &bundle{pool: pool, schema: schema, svc: svc, server: srv}
}

// sqlDB is database/sql on pool, through pgx's stdlib driver, closed when
// the test ends.
func sqlDB(t *testing.T, pool *pgxpool.Pool) *sql.DB {
	t.Helper()
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { db.Close() })
	return db
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// response is an HTTP answer, read.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("response %d %q is not JSON: %v", r.status, r.body, err)
	}
}

// do sends a request; headers are name, value pairs.
func (b *bundle) do(t *testing.T, method, path, body string, headers ...string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), method, b.server.URL+path, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := b.server.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}

// place posts body as JSON, with an optional Idempotency-Key.
func (b *bundle) place(t *testing.T, body string, key string) response {
	t.Helper()
	h := []string{"Content-Type", "application/json"}
	if key != "" {
		h = append(h, "Idempotency-Key", key)
	}
	return b.do(t, http.MethodPost, "/orders", body, h...)
}

// placed places a valid order and returns it.
func (b *bundle) placed(t *testing.T) orderservice.Order {
	t.Helper()
	r := b.place(t, `{"customerId":"C-1","amount":"150.00","currency":"EUR","items":[{"sku":"BOOK-1","quantity":2}]}`, "")
	if r.status != http.StatusCreated {
		t.Fatalf("place: %d %s", r.status, r.body)
	}
	var o orderservice.Order
	r.json(t, &o)
	return o
}

// outboxRow is a message in the outbox, as the relay would publish it.
type outboxRow struct {
	EventType, AggregateType, AggregateID, Topic string
	EventVersion                                 int
	Payload                                      map[string]any
}

// outbox returns the outbox's messages in enqueue order.
func (b *bundle) outbox(t *testing.T) []outboxRow {
	t.Helper()
	rows, err := b.pool.Query(testCtx(t), `SELECT event_type, aggregate_type, aggregate_id, topic, event_version, payload
		FROM `+pgx.Identifier{b.schema, "outbox_messages"}.Sanitize()+` ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (outboxRow, error) {
		var (
			r       outboxRow
			payload []byte
		)
		if err := row.Scan(&r.EventType, &r.AggregateType, &r.AggregateID, &r.Topic, &r.EventVersion, &payload); err != nil {
			return r, err
		}
		return r, json.Unmarshal(payload, &r.Payload)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// count returns the number of rows of a table in the test's schema.
func (b *bundle) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(testCtx(t), `SELECT count(*) FROM `+pgx.Identifier{b.schema, table}.Sanitize()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/internal/pgtest"
)

// A placed order's event reaches the consumer, which writes one invoice;
// the same record delivered again writes none.
func TestRun_PlacedOrderIsPublishedAndInvoicedOnce(t *testing.T) {
	t.Parallel()
	q := start(t)
	if code := q.post(t, `{"id":"o-1","amountCents":1250}`); code != http.StatusCreated {
		t.Fatalf("POST /orders: %d, want 201", code)
	}
	q.logs.await(t, "event handled", "order", "o-1", "result", "processed")

	redeliverFirst(t, q.brokers, "orders")
	q.logs.await(t, "event handled", "order", "o-1", "result", "duplicate")
	var n, amount int64
	if err := q.db.QueryRow(context.Background(), "SELECT count(*), coalesce(sum(amount_cents), 0) FROM invoices WHERE order_id = 'o-1'").Scan(&n, &amount); err != nil {
		t.Fatal(err)
	}
	if n != 1 || amount != 1250 {
		t.Fatalf("invoices of o-1: %d for %d cents, want 1 for 1250", n, amount)
	}
	if got := q.logs.count("event published"); got != 1 {
		t.Fatalf("%d events published, want 1", got)
	}
}

// An order refused (a bad body, an id taken) commits neither an order nor
// an event.
func TestRun_RefusedOrderEnqueuesNothing(t *testing.T) {
	t.Parallel()
	q := start(t)
	if code := q.post(t, `{"id":"o-1","amountCents":1250}`); code != http.StatusCreated {
		t.Fatalf("POST /orders: %d, want 201", code)
	}
	for body, want := range map[string]int{
		`{"id":"o-2","amountCents`:         http.StatusBadRequest,
		`{"id":"o-2","amountCents":0}`:     http.StatusBadRequest,
		`{"id":"o-1","amountCents":99900}`: http.StatusConflict,
	} {
		if code := q.post(t, body); code != want {
			t.Errorf("POST /orders %s: %d, want %d", body, code, want)
		}
	}
	var orders, events int
	if err := q.db.QueryRow(context.Background(), "SELECT (SELECT count(*) FROM orders), (SELECT count(*) FROM outbox_messages)").Scan(&orders, &events); err != nil {
		t.Fatal(err)
	}
	if orders != 1 || events != 1 {
		t.Fatalf("%d orders and %d events, want only o-1's: 1 and 1", orders, events)
	}
}

// quickstart is run, started for a test.
type quickstart struct {
	addr    string        // the HTTP address
	brokers []string      // the embedded broker's
	db      *pgxpool.Pool // search_path is the quickstart's schema
	logs    *logBuffer
}

// start runs the quickstart on an embedded broker and a schema of the
// test's own; it stops the quickstart, checking that it stops cleanly, and
// drops the schema when the test ends.
func start(t *testing.T) *quickstart {
	t.Helper()
	db, schema := pgtest.Schema(t)
	b, err := broker.Start(broker.Config{Listen: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	logs := &logBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, config{DatabaseURL: pgtest.URL(), Brokers: b.Addrs(), Listen: "127.0.0.1:0",
			Schema: schema, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("run did not return within 30s of its context's end")
		}
		if t.Failed() {
			t.Logf("the quickstart's log:\n%s", logs.String())
		}
	})
	addr := logs.await(t, "listening")["addr"]
	return &quickstart{addr: addr.(string), brokers: b.Addrs(), db: db, logs: logs}
}

// post sends body to POST /orders and returns the status code.
func (q *quickstart) post(t *testing.T, body string) int {
	t.Helper()
	resp, err := http.Post("http://"+q.addr+"/orders", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// redeliverFirst produces the first record of topic again, as Kafka
// redelivers it to a consumer that crashed before committing its offset.
func redeliverFirst(t *testing.T, brokers []string, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	fetches := cl.PollRecords(ctx, 1)
	if err := fetches.Err0(); err != nil {
		t.Fatalf("reading %s: %v", topic, err)
	}
	rec := fetches.Records()[0]
	again := &kgo.Record{Topic: rec.Topic, Key: rec.Key, Value: rec.Value, Headers: rec.Headers}
	if err := cl.ProduceSync(ctx, again).FirstErr(); err != nil {
		t.Fatalf("producing to %s: %v", topic, err)
	}
}

// logBuffer keeps JSON log lines and finds them.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// matching returns the lines with message msg and the attributes kv
// (name, value, name, value ...).
func (l *logBuffer) matching(msg string, kv ...string) []map[string]any {
	var found []map[string]any
	for line := range strings.Lines(l.String()) {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil || m["msg"] != msg {
			continue
		}
		ok := true
		for i := 0; i+1 < len(kv); i += 2 {
			ok = ok && m[kv[i]] == kv[i+1]
		}
		if ok {
			found = append(found, m)
		}
	}
	return found
}

// count returns the number of lines with message msg.
func (l *logBuffer) count(msg string) int { return len(l.matching(msg)) }

// await waits up to 30s for a line that matching finds and returns it.
func (l *logBuffer) await(t *testing.T, msg string, kv ...string) map[string]any {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if found := l.matching(msg, kv...); len(found) > 0 {
			return found[0]
		}
	}
	t.Fatalf("no log line %q %v within 30s", msg, kv)
	return nil
}

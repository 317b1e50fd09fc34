package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/internal/pgtest"
)

// orderSystem is the reference order system running as separate processes:
// the order service, billing, inventory and relays, over one PostgreSQL
// database (a schema per part) and an embedded broker.
type orderSystem struct {
	t                                  *testing.T
	pool                               *pgxpool.Pool
	outbox, orders, billing, inventory string // schemas
	env                                []string
	ordersURL                          string
	billingProc, inventoryProc         *proc
}

func newOrderSystem(t *testing.T) *orderSystem {
	t.Helper()
	pool, schema := pgtest.Schema(t)
	s := &orderSystem{t: t, pool: pool, outbox: schema,
		orders: schema + "_orders", billing: schema + "_billing", inventory: schema + "_inventory"}
	inboxSchema := schema + "_inbox"
	t.Cleanup(func() { // registered before the processes start, so it runs after they are killed
		for _, sc := range []string{s.orders, s.billing, s.inventory, inboxSchema} {
			if _, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{sc}.Sanitize()+" CASCADE"); err != nil {
				t.Logf("drop schema %s: %v", sc, err)
			}
		}
	})
	b, err := broker.Start(broker.Config{Listen: "127.0.0.1:0", SeedTopics: []string{"orders", "inventory"}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	// Configured as in production: the database and brokers from the
	// environment, shared by every process.
	s.env = []string{
		"OUTBOX_DATABASE_URL=" + pgtest.URL(),
		"OUTBOX_KAFKA_BROKERS=" + strings.Join(b.Addrs(), ","),
		"OUTBOX_SCHEMA=" + schema,
		"OUTBOX_INBOX_SCHEMA=" + inboxSchema,
	}
	migrate := exec.Command(binary, "migrate")
	migrate.Env = append(os.Environ(), s.env...)
	if out, err := migrate.CombinedOutput(); err != nil {
		t.Fatalf("outbox migrate: %v\n%s", err, out)
	}
	return s
}

func (s *orderSystem) start(args ...string) *proc {
	return start(s.t, s.env, args...)
}

func (s *orderSystem) startRelay() *proc {
	return s.start("relay", "--lease", "2s", "--poll-interval", "100ms", "--retry-base", "50ms", "--retry-max", "500ms")
}

func (s *orderSystem) startConsumers() {
	stats := []string{"--stats-interval", "200ms", "--handler-retry-base", "50ms", "--handler-retry-max", "500ms"}
	s.billingProc = s.start(append([]string{"example", "billing", "--billing-schema", s.billing}, stats...)...)
	s.inventoryProc = s.start(append([]string{"example", "inventory", "--inventory-schema", s.inventory,
		"--stock", "BOOK-1=1000000,MUG-1=1000000"}, stats...)...)
	s.billingProc.waitFor("consumer started", 30*time.Second)
	s.inventoryProc.waitFor("consumer started", 30*time.Second)
}

var listeningRe = regexp.MustCompile(`orders listening on (http://\S+)`)

func (s *orderSystem) startOrders() *proc {
	p := s.start("example", "orders", "--listen", "127.0.0.1:0", "--orders-schema", s.orders)
	p.waitFor("orders listening on", 30*time.Second)
	s.ordersURL = listeningRe.FindStringSubmatch(p.output())[1]
	return p
}

// post sends a request to the order service and decodes the order.
func (s *orderSystem) post(path, body, idempotencyKey string) (int, map[string]any, error) {
	req, err := http.NewRequest(http.MethodPost, s.ordersURL+path, bytes.NewBufferString(body))
	if err != nil {
		return 0, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		return resp.StatusCode, nil, fmt.Errorf("%d %q: %w", resp.StatusCode, data, err)
	}
	return resp.StatusCode, v, nil
}

// parallel runs fn(i) for i in [from, to) on workers goroutines.
func parallel(from, to, workers int, fn func(i int)) {
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < to; i = int(next.Add(1) - 1) {
				fn(i)
			}
		})
	}
	wg.Wait()
}

func (s *orderSystem) count(query string) int {
	s.t.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), query).Scan(&n); err != nil {
		s.t.Fatalf("%s: %v", query, err)
	}
	return n
}

func (s *orderSystem) table(schema, table string) string {
	return pgx.Identifier{schema, table}.Sanitize()
}

// waitUntil polls cond until it holds or within passes.
func (s *orderSystem) waitUntil(what string, within time.Duration, cond func() bool) {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			s.t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var handledRe = regexp.MustCompile(`msg="events handled" group=\S+ processed=(\d+) duplicates=(\d+) parked=(\d+)`)

// handled returns the last counts a consumer process logged.
func handled(p *proc) (processed, duplicates, parked int) {
	m := handledRe.FindAllStringSubmatch(p.output(), -1)
	if len(m) == 0 {
		return 0, 0, 0
	}
	last := m[len(m)-1]
	processed, _ = strconv.Atoi(last[1])
	duplicates, _ = strconv.Atoi(last[2])
	parked, _ = strconv.Atoi(last[3])
	return processed, duplicates, parked
}

// The whole system as separate processes: 1,000 orders placed
// concurrently (some retried with their Idempotency-Key), the relay killed
// with SIGKILL while they flow, then every outbox message published a
// second time on purpose. Billing still has exactly one invoice per order
// and inventory one reservation per order, the stock is reserved once, and
// each order's events reach Kafka in version order.
func TestOrderSystem_ThousandOrdersKilledRelayEveryEventTwice_ExactlyOneInvoiceAndReservationEach(t *testing.T) {
	t.Parallel()
	const (
		orders  = 1000
		workers = 16
	)
	began := time.Now()
	s := newOrderSystem(t)
	s.startConsumers()
	ordersProc := s.startOrders()
	relay1 := s.startRelay()
	relay1.waitFor("relay starting", 30*time.Second)

	ids := make([]string, orders)
	quantity := func(i int) int { return 1 + i%3 }
	var placed atomic.Int64
	place := func(i int) {
		body := fmt.Sprintf(`{"customerId":"C-%d","amount":"%d.%02d","currency":"EUR","items":[{"sku":"BOOK-1","quantity":%d},{"sku":"MUG-1","quantity":1}]}`,
			i%50, 10+i%90, i%100, quantity(i))
		key := fmt.Sprintf("order-%d", i)
		status, o, err := s.post("/orders", body, key)
		if err != nil || status != http.StatusCreated {
			t.Errorf("order %d: %d %v %v", i, status, o, err)
			return
		}
		ids[i] = o["id"].(string)
		if i%10 == 0 { // the client retries: the same order comes back
			status, again, err := s.post("/orders", body, key)
			if err != nil || status != http.StatusCreated || again["id"] != ids[i] {
				t.Errorf("retry of order %d: %d %v %v; want 201 with id %s", i, status, again, err, ids[i])
			}
		}
		placed.Add(1)
	}

	parallel(0, orders/2, workers, place)
	second := make(chan struct{})
	go func() { defer close(second); parallel(orders/2, orders, workers, place) }()
	s.waitUntil("100 more orders placed", 60*time.Second, func() bool { return placed.Load() >= orders/2+100 })
	relay1.kill() // SIGKILL while orders flow: its leased messages wait for the lease to expire
	inFlight := s.count("SELECT count(*) FROM " + s.table(s.outbox, "outbox_messages") + " WHERE lease_token IS NOT NULL AND status IN ('PENDING', 'FAILED', 'IN_FLIGHT')")
	s.waitUntil("300 more orders placed", 60*time.Second, func() bool { return placed.Load() >= orders/2+300 })
	relay2 := s.startRelay()
	<-second
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("relay killed with %d messages in flight; %d orders placed", inFlight, placed.Load())

	// The lifecycle: every 5th order is paid; of those, every 2nd is
	// shipped and the others cancelled (a credit note each); every 7th
	// unpaid order is cancelled (its invoice void).
	paid, shipped, creditNotes, voided := 0, 0, 0, 0
	for i := range orders {
		switch {
		case i%10 == 5:
			paid, shipped = paid+1, shipped+1
		case i%10 == 0:
			paid, creditNotes = paid+1, creditNotes+1
		case i%7 == 1:
			voided++
		}
	}
	parallel(0, orders, workers, func(i int) {
		var steps []string
		switch {
		case i%10 == 5:
			steps = []string{"pay", "ship"}
		case i%10 == 0:
			steps = []string{"pay", "cancel"}
		case i%7 == 1:
			steps = []string{"cancel"}
		}
		for _, step := range steps {
			if status, o, err := s.post("/orders/"+ids[i]+"/"+step, "", ""); err != nil || status != http.StatusOK {
				t.Errorf("%s order %d: %d %v %v", step, i, status, o, err)
			}
		}
		if i%10 == 5 { // an invalid transition changes nothing
			if status, o, err := s.post("/orders/"+ids[i]+"/pay", "", ""); err != nil || status != http.StatusConflict {
				t.Errorf("paying shipped order %d again: %d %v %v; want 409", i, status, o, err)
			}
		}
	})
	orderEvents := orders + paid + shipped + creditNotes + voided

	outboxTable := s.table(s.outbox, "outbox_messages")
	invoices, notes, reservations := s.table(s.billing, "invoices"), s.table(s.billing, "credit_notes"), s.table(s.inventory, "reservations")
	settled := func() bool {
		return s.count("SELECT count(*) FROM "+outboxTable+" WHERE status <> 'SENT'") == 0 &&
			s.count("SELECT count(*) FROM "+outboxTable) == orderEvents+orders+creditNotes+voided // + StockReserved, StockReleased
	}
	bothProcessedAll := func() bool {
		b, _, _ := handled(s.billingProc)
		i, _, _ := handled(s.inventoryProc)
		return b == orderEvents && i == orderEvents
	}
	s.waitUntil("every event published and handled once", 120*time.Second, func() bool { return settled() && bothProcessedAll() })

	check := func(when string) {
		t.Helper()
		for query, want := range map[string]int{
			"SELECT count(*) FROM " + invoices:                                                                      orders,
			"SELECT count(DISTINCT order_id) FROM " + invoices:                                                      orders,
			"SELECT count(*) FROM " + invoices + " WHERE status = 'CREDITED'":                                       creditNotes,
			"SELECT count(*) FROM " + invoices + " WHERE status = 'VOID'":                                           voided,
			"SELECT count(*) FROM " + invoices + " WHERE status = 'PAID'":                                           shipped,
			"SELECT count(*) FROM " + notes:                                                                         creditNotes,
			"SELECT count(*) FROM " + reservations:                                                                  orders,
			"SELECT count(*) FROM " + reservations + " WHERE status = 'SHIPPED'":                                    shipped,
			"SELECT count(*) FROM " + reservations + " WHERE status = 'RELEASED'":                                   creditNotes + voided,
			"SELECT count(*) FROM " + outboxTable + " WHERE event_type = 'StockRejected' OR status = 'DEAD_LETTER'": 0,
		} {
			if got := s.count(query); got != want {
				t.Errorf("%s: %s = %d; want %d", when, query, got, want)
			}
		}
		// The stock was reserved exactly once per order: what left is the
		// units of the orders not cancelled; what is held, of those not shipped.
		wantAvailable, wantReserved := int64(1_000_000), int64(0)
		for i := range orders {
			cancelled := i%10 == 0 || (i%10 != 5 && i%7 == 1)
			if !cancelled {
				wantAvailable -= int64(quantity(i))
				if i%10 != 5 {
					wantReserved += int64(quantity(i))
				}
			}
		}
		var available, reserved int64
		if err := s.pool.QueryRow(context.Background(), "SELECT available, reserved FROM "+s.table(s.inventory, "stock")+" WHERE sku = 'BOOK-1'").Scan(&available, &reserved); err != nil {
			t.Fatal(err)
		}
		if available != wantAvailable || reserved != wantReserved {
			t.Errorf("%s: BOOK-1 %d available, %d reserved; want %d and %d", when, available, reserved, wantAvailable, wantReserved)
		}
	}
	check("after the run")

	// Every message delivered twice on purpose: the relay publishes all of
	// them again.
	tag, err := s.pool.Exec(context.Background(), "UPDATE "+outboxTable+" SET status = 'PENDING', next_attempt_at = now(), published_at = NULL WHERE status = 'SENT'")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d messages set to be published again", tag.RowsAffected())
	s.waitUntil("every event published again and absorbed as a duplicate", 120*time.Second, func() bool {
		_, bd, _ := handled(s.billingProc)
		_, id, _ := handled(s.inventoryProc)
		return settled() && bd >= orderEvents && id >= orderEvents
	})
	check("after every event came twice")
	for name, p := range map[string]*proc{"billing": s.billingProc, "inventory": s.inventoryProc} {
		processed, duplicates, parked := handled(p)
		if processed != orderEvents || parked != 0 {
			t.Errorf("%s processed %d events (%d duplicates), parked %d; want %d processed, none parked", name, processed, duplicates, parked, orderEvents)
		}
		t.Logf("%s: %d deliveries, %d processed, %d duplicates absorbed, %d parked", name, processed+duplicates, processed, duplicates, parked)
	}

	// Each order's events are on the topic in the order of their versions.
	recs := consumed(t, strings.Split(strings.TrimPrefix(s.env[1], "OUTBOX_KAFKA_BROKERS="), ","), "orders", orderEvents, 30*time.Second)
	seen, next := map[string]bool{}, map[string]float64{}
	for _, r := range recs {
		if id := header(r, "eventId"); !seen[id] {
			seen[id] = true
			var p struct{ Version float64 }
			if err := json.Unmarshal(r.Value, &p); err != nil {
				t.Fatal(err)
			}
			next[string(r.Key)]++
			if p.Version != next[string(r.Key)] {
				t.Errorf("order %s: %s with version %v arrived as event %v", r.Key, header(r, "eventType"), p.Version, next[string(r.Key)])
			}
		}
	}
	if len(seen) != orderEvents {
		t.Errorf("%d distinct events on the orders topic; want %d", len(seen), orderEvents)
	}

	t.Logf("%d orders, %d events each delivered twice, checked after %s", orders, orderEvents, time.Since(began).Round(time.Second))
	for _, p := range []*proc{ordersProc, relay2, s.billingProc, s.inventoryProc} {
		if code := p.stop(30 * time.Second); code != 0 {
			t.Errorf("exit code %d after SIGTERM; want 0", code)
		}
	}
}

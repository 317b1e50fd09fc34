package orderservice_test

import (
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/examples/orders/orderservice"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/store/pgstore"
)

func TestPlace_WritesTheOrderAndOrderPlacedTogether(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.place(t, `{"customerId":"C-42","amount":"150.00","currency":"EUR","items":[{"sku":"BOOK-1","quantity":2}]}`, "")
	if r.status != http.StatusCreated {
		t.Fatalf("status %d %s; want 201", r.status, r.body)
	}
	var o orderservice.Order
	r.json(t, &o)
	if o.Status != orderservice.StatusPlaced || o.Version != 1 || o.Amount != "150.00" || o.Currency != "EUR" ||
		o.CustomerID != "C-42" || len(o.Items) != 1 || o.Items[0] != (orderservice.Item{SKU: "BOOK-1", Quantity: 2}) {
		t.Errorf("order %+v", o)
	}
	if loc := r.header.Get("Location"); loc != "/orders/"+o.ID.String() {
		t.Errorf("Location %q", loc)
	}

	msgs := b.outbox(t)
	if len(msgs) != 1 {
		t.Fatalf("%d outbox messages; want 1", len(msgs))
	}
	m := msgs[0]
	if m.EventType != "OrderPlaced" || m.EventVersion != 2 || m.AggregateType != "Order" || m.AggregateID != o.ID.String() || m.Topic != "orders" {
		t.Errorf("outbox message %s v%d %s/%s on %q; want OrderPlaced v2 Order/%s on orders", m.EventType, m.EventVersion, m.AggregateType, m.AggregateID, m.Topic, o.ID)
	}
	total, _ := m.Payload["total"].(map[string]any)
	if m.Payload["orderId"] != o.ID.String() || m.Payload["version"] != 1.0 || total["amountMinor"] != 15000.0 || total["currency"] != "EUR" {
		t.Errorf("payload %v", m.Payload)
	}

	g := b.do(t, http.MethodGet, "/orders/"+o.ID.String(), "")
	if g.status != http.StatusOK || string(g.body) != string(r.body) {
		t.Errorf("GET: %d %s\nwant 200 %s", g.status, g.body, r.body)
	}
}

func TestPlace_WithoutItemsIsAnOrderWithAnEmptyItemList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.place(t, `{"customerId":"C-1","amount":"9.9","currency":"USD"}`, "")
	var o orderservice.Order
	r.json(t, &o)
	if r.status != http.StatusCreated || o.Items == nil || len(o.Items) != 0 || o.Amount != "9.90" {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if items, ok := b.outbox(t)[0].Payload["items"].([]any); !ok || len(items) != 0 {
		t.Errorf("event items %v; want []", b.outbox(t)[0].Payload["items"])
	}
}

func TestPlace_PublishesVersion1WhileConfiguredTo(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *orderservice.Config) { c.PlacedVersion = 1; c.Topic = "orders.v1" })
	b.placed(t)
	m := b.outbox(t)[0]
	if m.EventVersion != 1 || m.Payload["amount"] != "150.00" || m.Payload["currency"] != "EUR" || m.Topic != "orders.v1" {
		t.Errorf("v1 event: v%d on %s, payload %v", m.EventVersion, m.Topic, m.Payload)
	}
}

// The HTTP validation table: every bad request names the field, gets its
// status code, and writes nothing.
func TestPlace_BadInputGetsAnErrorNamingTheFieldAndWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *orderservice.Config) { c.MaxBodyBytes = 1024 })
	good := func(edit string) string { return fmt.Sprintf(`{"customerId":"C-1","currency":"EUR",%s}`, edit) }
	cases := []struct {
		name, contentType, body string
		status                  int
		field, says             string
	}{
		{"missing amount", "application/json", `{"customerId":"C-1","currency":"EUR"}`, 400, "amount", "required"},
		{"null amount", "application/json", good(`"amount":null`), 400, "amount", "required"},
		{"empty amount", "application/json", good(`"amount":""`), 400, "amount", "required"},
		{"negative amount", "application/json", good(`"amount":"-1.00"`), 400, "amount", "negative"},
		{"zero amount", "application/json", good(`"amount":"0.00"`), 400, "amount", "greater than 0"},
		{"three decimals", "application/json", good(`"amount":"1.005"`), 400, "amount", "two decimals"},
		{"amount as a number", "application/json", good(`"amount":150.00`), 400, "amount", "string"},
		{"amount not a number", "application/json", good(`"amount":"lots"`), 400, "amount", "decimal"},
		{"amount with exponent", "application/json", good(`"amount":"1e3"`), 400, "amount", "decimal"},
		{"amount too large", "application/json", good(`"amount":"1000000000.00"`), 400, "amount", "at most"},
		{"unknown currency", "application/json", `{"customerId":"C-1","amount":"1.00","currency":"XXX"}`, 400, "currency", "ISO 4217"},
		{"lower-case currency", "application/json", `{"customerId":"C-1","amount":"1.00","currency":"eur"}`, 400, "currency", "ISO 4217"},
		{"missing currency", "application/json", `{"customerId":"C-1","amount":"1.00"}`, 400, "currency", "required"},
		{"missing customer", "application/json", `{"amount":"1.00","currency":"EUR"}`, 400, "customerId", "required"},
		{"customer not a string", "application/json", `{"customerId":42,"amount":"1.00","currency":"EUR"}`, 400, "customerId", "string"},
		{"customer with control characters", "application/json", `{"customerId":"C\u0000","amount":"1.00","currency":"EUR"}`, 400, "customerId", "control"},
		{"unknown field", "application/json", good(`"amount":"1.00","ammount":"2"`), 400, "ammount", "not a field"},
		{"items not a list", "application/json", good(`"amount":"1.00","items":{}`), 400, "items", "list"},
		{"item without sku", "application/json", good(`"amount":"1.00","items":[{"quantity":1}]`), 400, "items[0].sku", "required"},
		{"item with bad sku", "application/json", good(`"amount":"1.00","items":[{"sku":"a b","quantity":1}]`), 400, "items[0].sku", "letters"},
		{"item with zero quantity", "application/json", good(`"amount":"1.00","items":[{"sku":"A","quantity":0}]`), 400, "items[0].quantity", "from 1"},
		{"item with fractional quantity", "application/json", good(`"amount":"1.00","items":[{"sku":"A","quantity":1.5}]`), 400, "items[0].quantity", "whole"},
		{"item with unknown field", "application/json", good(`"amount":"1.00","items":[{"sku":"A","quantity":1,"price":"2"}]`), 400, "items[0].price", "not a field"},
		{"repeated sku", "application/json", good(`"amount":"1.00","items":[{"sku":"A","quantity":1},{"sku":"A","quantity":2}]`), 400, "items[1].sku", "repeats"},
		{"not JSON", "application/json", `{"customerId":`, 400, "body", "JSON object"},
		{"a JSON list", "application/json", `[]`, 400, "body", "JSON object"},
		{"JSON null", "application/json", `null`, 400, "body", "JSON object"},
		{"empty body", "application/json", ``, 400, "body", "JSON object"},
		{"oversized body", "application/json", good(`"amount":"1.00","items":[` + strings.Repeat(`{"sku":"A","quantity":1},`, 60) + `{"sku":"B","quantity":1}]`), 413, "body", "at most 1024 bytes"},
		{"text content type", "text/plain", good(`"amount":"1.00"`), 415, "Content-Type", "application/json"},
		{"form content type", "application/x-www-form-urlencoded", `amount=1.00`, 415, "Content-Type", "application/json"},
		{"no content type", "", good(`"amount":"1.00"`), 415, "Content-Type", "application/json"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var r response
			if c.contentType == "" {
				r = b.do(t, http.MethodPost, "/orders", c.body)
			} else {
				r = b.do(t, http.MethodPost, "/orders", c.body, "Content-Type", c.contentType)
			}
			if r.status != c.status {
				t.Fatalf("status %d %s; want %d", r.status, r.body, c.status)
			}
			var e struct{ Error, Field string }
			r.json(t, &e)
			if e.Field != c.field || !strings.Contains(e.Error, c.says) {
				t.Errorf("error %+v; want field %q and a message with %q", e, c.field, c.says)
			}
		})
	}
	t.Cleanup(func() {
		if n, m := b.count(t, "orders"), b.count(t, "outbox_messages"); n != 0 || m != 0 {
			t.Errorf("bad requests wrote %d orders and %d outbox messages; want none", n, m)
		}
	})
}

// encoding/json replaces bytes that are not UTF-8, and escapes of unpaired
// surrogates, with U+FFFD and no error; the service refuses such a request
// naming the field instead of storing the replaced text.
func TestPlace_TextThatDecodingWouldChangeIs400NamingTheField(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const utf8Rule, surrogateRule = "must be valid UTF-8", "unpaired surrogate"
	order := func(customer, amount, currency, sku string) string {
		return `{"customerId":"` + customer + `","amount":"` + amount + `","currency":"` + currency +
			`","items":[{"sku":"BOOK-1","quantity":1},{"sku":"` + sku + `","quantity":1}]}`
	}
	cases := []struct {
		name, body, field, says string
	}{
		{"customerId with a byte that is not UTF-8", order("C\xff1", "1.00", "EUR", "A"), "customerId", utf8Rule},
		{"customerId with a truncated sequence", order("C\xe2\x82", "1.00", "EUR", "A"), "customerId", utf8Rule},
		{"customerId with an overlong encoding", order("C\xc0\xaf", "1.00", "EUR", "A"), "customerId", utf8Rule},
		{"customerId with an encoded surrogate", order("C\xed\xa0\x80", "1.00", "EUR", "A"), "customerId", utf8Rule},
		{"amount", order("C-1", "1.0\xff", "EUR", "A"), "amount", utf8Rule},
		{"currency", order("C-1", "1.00", "EU\xc3", "A"), "currency", utf8Rule},
		{"second item's sku", order("C-1", "1.00", "EUR", "A\xfe"), "items[1].sku", utf8Rule},
		{"customerId with an escaped lone high surrogate", order(`C\ud800`, "1.00", "EUR", "A"), "customerId", surrogateRule},
		{"customerId with an escaped lone low surrogate", order(`\udc00C`, "1.00", "EUR", "A"), "customerId", surrogateRule},
		{"customerId with a high surrogate before a letter", order(`C\ud83d\u0041`, "1.00", "EUR", "A"), "customerId", surrogateRule},
		{"customerId with two high surrogates", order(`C\ud83d\ud83d`, "1.00", "EUR", "A"), "customerId", surrogateRule},
		{"sku with an escaped lone surrogate", order("C-1", "1.00", "EUR", `A\uDFFF`), "items[1].sku", surrogateRule},
		{"a key given twice, the first not UTF-8", "{\"customerId\":\"C\xff\",\"customerId\":\"C-1\",\"amount\":\"1.00\",\"currency\":\"EUR\"}", "body", utf8Rule},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := b.place(t, c.body, "")
			if r.status != http.StatusBadRequest {
				t.Fatalf("status %d %s; want 400", r.status, r.body)
			}
			var e struct{ Error, Field string }
			r.json(t, &e)
			if e.Field != c.field || !strings.Contains(e.Error, c.says) {
				t.Errorf("error %+v; want field %q and a message with %q", e, c.field, c.says)
			}
		})
	}
	t.Cleanup(func() {
		if n, m := b.count(t, "orders"), b.count(t, "outbox_messages"); n != 0 || m != 0 {
			t.Errorf("refused requests wrote %d orders and %d outbox messages; want none", n, m)
		}
	})
}

// Escapes that stand for characters, surrogate pairs included, and a
// U+FFFD the client sent, are kept exactly.
func TestPlace_EscapedAndNonASCIITextIsStoredAsSent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.place(t, `{"customerId":"Kunde \u00fc \ud83d\ude9a \\ud800 \"q\" \ufffd � 東京","amount":"1.00","currency":"EUR"}`, "")
	if r.status != http.StatusCreated {
		t.Fatalf("%d %s", r.status, r.body)
	}
	var o orderservice.Order
	r.json(t, &o)
	if want := "Kunde ü 🚚 \\ud800 \"q\" � � 東京"; o.CustomerID != want {
		t.Errorf("customerId %q; want %q", o.CustomerID, want)
	}
}

func TestPlace_ContentTypeWithCharsetIsAccepted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.do(t, http.MethodPost, "/orders", `{"customerId":"C-1","amount":"1.00","currency":"EUR"}`, "Content-Type", "application/json; charset=utf-8")
	if r.status != http.StatusCreated {
		t.Fatalf("%d %s", r.status, r.body)
	}
}

func TestPlace_IdempotencyKeyRetryReturnsTheFirstOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := `{"customerId":"C-1","amount":"150.00","currency":"EUR"}`
	first := b.place(t, body, "key-1")
	if first.status != http.StatusCreated {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	var o orderservice.Order
	first.json(t, &o)
	if _, err := b.svc.Pay(testCtx(t), o.ID); err != nil { // the order moves on ...
		t.Fatal(err)
	}
	// ... and a retry, spelled differently but meaning the same, still
	// gets the first answer.
	retry := b.place(t, `{"currency":"EUR", "amount":"150", "customerId":"C-1"}`, "key-1")
	if retry.status != http.StatusCreated || string(retry.body) != string(first.body) {
		t.Fatalf("retry: %d %s\nwant 201 %s", retry.status, retry.body, first.body)
	}
	if retry.header.Get("Idempotent-Replayed") != "true" || retry.header.Get("Location") != first.header.Get("Location") {
		t.Errorf("retry headers %v", retry.header)
	}
	if n := b.count(t, "orders"); n != 1 {
		t.Errorf("%d orders; want 1", n)
	}
	if msgs := b.outbox(t); len(msgs) != 2 || msgs[0].EventType != "OrderPlaced" || msgs[1].EventType != "OrderPaid" {
		t.Errorf("outbox %v; want OrderPlaced and OrderPaid only", msgs)
	}
	// Another key is another order.
	if r := b.place(t, body, "key-2"); r.status != http.StatusCreated || string(r.body) == string(first.body) {
		t.Errorf("another key: %d %s", r.status, r.body)
	}
}

func TestPlace_ConcurrentRetriesWithOneKeyPlaceOneOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 8
	bodies := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r := b.place(t, `{"customerId":"C-1","amount":"5.00","currency":"EUR"}`, "same-key")
			if r.status != http.StatusCreated {
				t.Errorf("request %d: %d %s", i, r.status, r.body)
			}
			bodies[i] = string(r.body)
		})
	}
	wg.Wait()
	for i := range bodies {
		if bodies[i] != bodies[0] {
			t.Errorf("answer %d differs:\n%s\n%s", i, bodies[i], bodies[0])
		}
	}
	if c, m := b.count(t, "orders"), len(b.outbox(t)); c != 1 || m != 1 {
		t.Errorf("%d orders and %d events; want 1 and 1", c, m)
	}
}

func TestPlace_IdempotencyKeyReusedForAnotherRequestIs422(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.place(t, `{"customerId":"C-1","amount":"1.00","currency":"EUR"}`, "k")
	r := b.place(t, `{"customerId":"C-1","amount":"2.00","currency":"EUR"}`, "k")
	var e struct{ Error, Field string }
	r.json(t, &e)
	if r.status != http.StatusUnprocessableEntity || e.Field != "Idempotency-Key" {
		t.Fatalf("%d %s; want 422 naming Idempotency-Key", r.status, r.body)
	}
	if n := b.count(t, "orders"); n != 1 {
		t.Errorf("%d orders; want 1", n)
	}
}

func TestPlace_MalformedIdempotencyKeyIs400(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.place(t, `{"customerId":"C-1","amount":"1.00","currency":"EUR"}`, strings.Repeat("k", 256))
	if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), `"field":"Idempotency-Key"`) {
		t.Fatalf("%d %s", r.status, r.body)
	}
}

func TestLifecycle_EachTransitionWritesItsEventWithTheNextVersion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	o := b.placed(t)
	for i, action := range []string{"pay", "ship"} {
		r := b.do(t, http.MethodPost, "/orders/"+o.ID.String()+"/"+action, "")
		var got orderservice.Order
		r.json(t, &got)
		if r.status != http.StatusOK || got.Version != int64(i+2) {
			t.Fatalf("%s: %d %s", action, r.status, r.body)
		}
	}
	msgs := b.outbox(t)
	want := []struct {
		typ     string
		version float64
	}{{"OrderPlaced", 1}, {"OrderPaid", 2}, {"OrderShipped", 3}}
	if len(msgs) != len(want) {
		t.Fatalf("%d events; want %d", len(msgs), len(want))
	}
	for i, w := range want {
		m := msgs[i]
		if m.EventType != w.typ || m.Payload["version"] != w.version || m.AggregateID != o.ID.String() || m.AggregateType != "Order" || m.Topic != "orders" {
			t.Errorf("event %d: %s version %v of %s/%s on %s; want %s version %v", i, m.EventType, m.Payload["version"], m.AggregateType, m.AggregateID, m.Topic, w.typ, w.version)
		}
	}
	if got, _ := b.svc.Get(testCtx(t), o.ID); got.Status != orderservice.StatusShipped || got.Version != 3 {
		t.Errorf("order now %s version %d; want SHIPPED 3", got.Status, got.Version)
	}
}

func TestCancel_NamesTheStatusTheOrderWasCancelledIn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	placed, paid := b.placed(t), b.placed(t)
	if _, err := b.svc.Pay(ctx, paid.ID); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uuid.UUID{placed.ID, paid.ID} {
		if r := b.do(t, http.MethodPost, "/orders/"+id.String()+"/cancel", ""); r.status != http.StatusOK {
			t.Fatalf("cancel: %d %s", r.status, r.body)
		}
	}
	prev := map[string]any{}
	for _, m := range b.outbox(t) {
		if m.EventType == "OrderCancelled" {
			prev[m.AggregateID] = m.Payload["previousStatus"]
		}
	}
	if prev[placed.ID.String()] != "PLACED" || prev[paid.ID.String()] != "PAID" {
		t.Errorf("previousStatus %v", prev)
	}
}

func TestLifecycle_InvalidTransitionIs409AndWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	placed, shipped, cancelled := b.placed(t), b.placed(t), b.placed(t)
	for _, step := range []func() (orderservice.Order, error){
		func() (orderservice.Order, error) { return b.svc.Pay(ctx, shipped.ID) },
		func() (orderservice.Order, error) { return b.svc.Ship(ctx, shipped.ID) },
		func() (orderservice.Order, error) { return b.svc.Cancel(ctx, cancelled.ID) },
	} {
		if _, err := step(); err != nil {
			t.Fatal(err)
		}
	}
	before := len(b.outbox(t))
	for _, c := range []struct {
		id     uuid.UUID
		action string
		status string
	}{
		{placed.ID, "ship", "PLACED"},
		{shipped.ID, "pay", "SHIPPED"},
		{shipped.ID, "cancel", "SHIPPED"},
		{cancelled.ID, "pay", "CANCELLED"},
		{cancelled.ID, "cancel", "CANCELLED"},
	} {
		r := b.do(t, http.MethodPost, "/orders/"+c.id.String()+"/"+c.action, "")
		var e struct{ Error, Status string }
		r.json(t, &e)
		if r.status != http.StatusConflict || e.Status != c.status {
			t.Errorf("%s a %s order: %d %s; want 409 naming %s", c.action, c.status, r.status, r.body, c.status)
		}
	}
	if after := len(b.outbox(t)); after != before {
		t.Errorf("refused transitions wrote %d events", after-before)
	}
	_, err := b.svc.Ship(ctx, placed.ID)
	var te *orderservice.TransitionError
	if !errors.As(err, &te) || !errors.Is(err, orderservice.ErrInvalidTransition) || te.Status != orderservice.StatusPlaced {
		t.Errorf("Ship of a placed order: %v; want a *TransitionError from PLACED", err)
	}
}

func TestGet_UnknownOrderIs404(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, path := range []string{"/orders/" + uuid.NewString(), "/orders/not-a-uuid", "/orders/" + uuid.NewString() + "/pay"} {
		method := http.MethodGet
		if strings.HasSuffix(path, "/pay") {
			method = http.MethodPost
		}
		if r := b.do(t, method, path, ""); r.status != http.StatusNotFound || !strings.Contains(string(r.body), `"error"`) {
			t.Errorf("%s %s: %d %s; want 404 with a JSON error", method, path, r.status, r.body)
		}
	}
	if _, err := b.svc.Get(testCtx(t), uuid.New()); !errors.Is(err, orderservice.ErrNotFound) {
		t.Errorf("Get: %v; want ErrNotFound", err)
	}
}

// Racing actions on one order are serialised by its row lock: whatever
// wins, the order's events enter the outbox with versions 1, 2, 3 ... in
// enqueue order.
func TestLifecycle_ConcurrentActionsOnOneOrderKeepItsEventsInVersionOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	const orders = 10
	var ids []uuid.UUID
	for range orders {
		ids = append(ids, b.placed(t).ID)
	}
	var wg sync.WaitGroup
	for _, id := range ids {
		for _, act := range []func() (orderservice.Order, error){
			func() (orderservice.Order, error) { return b.svc.Pay(ctx, id) },
			func() (orderservice.Order, error) { return b.svc.Cancel(ctx, id) },
			func() (orderservice.Order, error) { return b.svc.Ship(ctx, id) },
			func() (orderservice.Order, error) { return b.svc.Cancel(ctx, id) },
		} {
			wg.Go(func() {
				if _, err := act(); err != nil && !errors.Is(err, orderservice.ErrInvalidTransition) {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	next := map[string]float64{}
	for _, m := range b.outbox(t) {
		next[m.AggregateID]++
		if m.Payload["version"] != next[m.AggregateID] {
			t.Errorf("order %s: %s has version %v in position %v", m.AggregateID, m.EventType, m.Payload["version"], next[m.AggregateID])
		}
	}
	for _, id := range ids {
		o, err := b.svc.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if float64(o.Version) != next[id.String()] {
			t.Errorf("order %s has version %d but %v events", id, o.Version, next[id.String()])
		}
	}
}

// The order and its event commit together: when the outbox write fails,
// the order is not there either.
func TestPlace_WhenTheOutboxWriteFailsNoOrderIsWritten(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Schema(t)
	unmigrated, err := pgstore.New(pool, pgstore.Config{Schema: schema}) // no Migrate: no outbox table
	if err != nil {
		t.Fatal(err)
	}
	svc, err := orderservice.New(sqlDB(t, pool), unmigrated.SQL(), orderservice.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Migrate(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	_, _, err = svc.Place(testCtx(t), orderservice.PlaceOrder{CustomerID: "C-1", Amount: "1.00", Currency: "EUR"}, "k")
	if err == nil {
		t.Fatal("Place succeeded without an outbox table")
	}
	b := &bundle{pool: pool, schema: schema}
	if n, k := b.count(t, "orders"), b.count(t, "idempotency_keys"); n != 0 || k != 0 {
		t.Errorf("%d orders and %d idempotency keys written; want none", n, k)
	}
}

func TestNew_NamesTheBadField(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Schema(t)
	st, _ := pgstore.New(pool, pgstore.Config{Schema: schema})
	db := sqlDB(t, pool)
	for field, c := range map[string]struct {
		db  *sql.DB
		ob  outbox.Enqueuer[*sql.Tx]
		cfg orderservice.Config
	}{
		"db":            {ob: st.SQL()},
		"outbox":        {db: db},
		"Schema":        {db, st.SQL(), orderservice.Config{Schema: "Orders; DROP"}},
		"PlacedVersion": {db, st.SQL(), orderservice.Config{PlacedVersion: 3}},
		"Topic":         {db, st.SQL(), orderservice.Config{Topic: "a topic"}},
		"MaxBodyBytes":  {db, st.SQL(), orderservice.Config{MaxBodyBytes: -1}},
	} {
		_, err := orderservice.New(c.db, c.ob, c.cfg)
		if !errors.Is(err, orderservice.ErrInvalidConfig) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v; want ErrInvalidConfig naming it", field, err)
		}
	}
}

// Every instance creates its tables at start; many at once must not fail.
func TestMigrate_IsIdempotentAndSafeWhenInstancesStartAtOnce(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Schema(t)
	st, _ := pgstore.New(pool, pgstore.Config{Schema: schema})
	db := sqlDB(t, pool)
	fresh := schema + "_svc"
	t.Cleanup(func() { _, _ = pool.Exec(testCtx(t), "DROP SCHEMA IF EXISTS "+fresh+" CASCADE") })
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			svc, err := orderservice.New(db, st.SQL(), orderservice.Config{Schema: fresh})
			if err != nil {
				t.Error(err)
				return
			}
			if err := svc.Migrate(testCtx(t)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	svc, _ := orderservice.New(db, st.SQL(), orderservice.Config{Schema: fresh})
	if err := svc.Migrate(testCtx(t)); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
}

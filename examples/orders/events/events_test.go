package events_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/outbox-dev/outbox/examples/orders/events"
	"github.com/outbox-dev/outbox/examples/orders/internal/eventtest"
	"github.com/outbox-dev/outbox/inbox"
)

var at = time.Date(2026, 3, 1, 12, 30, 0, 0, time.UTC)

const orderID = "0195f0e2-7a4c-7d2e-9b1a-3c5d7e9f1a2b"

func placedV2() events.OrderPlaced {
	return events.OrderPlaced{
		OrderID: orderID, CustomerID: "C-42",
		Total: events.Money{AmountMinor: 15000, Currency: "EUR"},
		Items: []events.Item{{SKU: "BOOK-1", Quantity: 2}}, Version: 1, PlacedAt: at,
	}
}

func placedV1() events.OrderPlacedV1 {
	return events.OrderPlacedV1{
		OrderID: orderID, CustomerID: "C-42", Amount: "150.00", Currency: "EUR",
		Items: []events.Item{{SKU: "BOOK-1", Quantity: 2}}, Version: 1, PlacedAt: at,
	}
}

// everyEvent has one valid payload of each event and version.
func everyEvent() []events.Event {
	return []events.Event{
		placedV2(), placedV1(),
		events.OrderPaid{OrderID: orderID, Version: 2, PaidAt: at},
		events.OrderShipped{OrderID: orderID, Version: 3, ShippedAt: at},
		events.OrderCancelled{OrderID: orderID, Version: 3, PreviousStatus: events.StatusPaid, CancelledAt: at},
		events.StockReserved{OrderID: orderID, Items: []events.Item{{SKU: "BOOK-1", Quantity: 2}}, ReservedAt: at},
		events.StockRejected{OrderID: orderID, Lines: []events.RejectedLine{
			{SKU: "LAMP-1", Quantity: 9, Available: 5, Problem: events.ProblemInsufficientStock}}, RejectedAt: at},
		events.StockReleased{OrderID: orderID, Items: []events.Item{{SKU: "BOOK-1", Quantity: 2}}, ReleasedAt: at},
	}
}

// The payloads are external contracts: this test pins their JSON, so that
// renaming a Go field cannot silently change what consumers receive.
func TestMessage_PayloadsKeepTheDocumentedJSON(t *testing.T) {
	t.Parallel()
	want := []string{
		`{"orderId":"` + orderID + `","customerId":"C-42","total":{"amountMinor":15000,"currency":"EUR"},"items":[{"sku":"BOOK-1","quantity":2}],"version":1,"placedAt":"2026-03-01T12:30:00Z"}`,
		`{"orderId":"` + orderID + `","customerId":"C-42","amount":"150.00","currency":"EUR","items":[{"sku":"BOOK-1","quantity":2}],"version":1,"placedAt":"2026-03-01T12:30:00Z"}`,
		`{"orderId":"` + orderID + `","version":2,"paidAt":"2026-03-01T12:30:00Z"}`,
		`{"orderId":"` + orderID + `","version":3,"shippedAt":"2026-03-01T12:30:00Z"}`,
		`{"orderId":"` + orderID + `","version":3,"previousStatus":"PAID","cancelledAt":"2026-03-01T12:30:00Z"}`,
		`{"orderId":"` + orderID + `","items":[{"sku":"BOOK-1","quantity":2}],"reservedAt":"2026-03-01T12:30:00Z"}`,
		`{"orderId":"` + orderID + `","lines":[{"sku":"LAMP-1","quantity":9,"available":5,"problem":"insufficient_stock"}],"rejectedAt":"2026-03-01T12:30:00Z"}`,
		`{"orderId":"` + orderID + `","items":[{"sku":"BOOK-1","quantity":2}],"releasedAt":"2026-03-01T12:30:00Z"}`,
	}
	for i, e := range everyEvent() {
		msg, err := events.Message(e, "t")
		if err != nil {
			t.Fatalf("%T: %v", e, err)
		}
		if string(msg.Payload) != want[i] {
			t.Errorf("%T v%d payload\n got %s\nwant %s", e, e.EventVersion(), msg.Payload, want[i])
		}
	}
}

func TestMessage_SetsAggregateTypeVersionTopicAndCorrelation(t *testing.T) {
	t.Parallel()
	for _, e := range everyEvent() {
		msg, err := events.Message(e, "the-topic")
		if err != nil {
			t.Fatalf("%T: %v", e, err)
		}
		if msg.AggregateID != orderID || msg.AggregateType != e.AggregateType() || msg.EventType != e.EventType() ||
			msg.EventVersion != e.EventVersion() || msg.Topic != "the-topic" || msg.CorrelationID != orderID ||
			msg.ContentType != "application/json" {
			t.Errorf("%T: message %+v", e, msg)
		}
	}
	if m, _ := events.Message(placedV2(), "x"); m.EventVersion != 2 || m.AggregateType != "Order" {
		t.Errorf("OrderPlaced is published as %s v%d; want Order v2", m.AggregateType, m.EventVersion)
	}
}

func TestDecode_EveryEventRoundTripsThroughMessage(t *testing.T) {
	t.Parallel()
	for _, e := range everyEvent() {
		msg, err := events.Message(e, "t")
		if err != nil {
			t.Fatalf("%T: %v", e, err)
		}
		got, err := events.Decode(eventtest.Delivered(t, msg))
		if err != nil {
			t.Fatalf("%T: Decode: %v", e, err)
		}
		want := e
		if v1, ok := e.(events.OrderPlacedV1); ok {
			if want, err = events.UpcastOrderPlacedV1(v1); err != nil {
				t.Fatal(err)
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Decode(Message(%T))\n got %#v\nwant %#v", e, got, want)
		}
	}
}

func TestDecode_OrderPlacedV1IsUpcastToV2(t *testing.T) {
	t.Parallel()
	msg, _ := events.Message(placedV1(), "orders")
	got, err := events.Decode(eventtest.Delivered(t, msg))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, placedV2()) {
		t.Errorf("v1 decoded as\n%#v\nwant the v2 event\n%#v", got, placedV2())
	}
}

func TestUpcastOrderPlacedV1_ConvertsTheDecimalAmountExactly(t *testing.T) {
	t.Parallel()
	for amount, minor := range map[string]int64{"150.00": 15000, "0.01": 1, "19.9": 1990, "7": 700, "999999999.99": 99999999999} {
		v1 := placedV1()
		v1.Amount, v1.Items = amount, nil
		v2, err := events.UpcastOrderPlacedV1(v1)
		if err != nil {
			t.Fatalf("%s: %v", amount, err)
		}
		if v2.Total != (events.Money{AmountMinor: minor, Currency: "EUR"}) || v2.Items == nil || len(v2.Items) != 0 {
			t.Errorf("amount %s upcast to total %+v, items %#v; want %d EUR and an empty item list", amount, v2.Total, v2.Items, minor)
		}
	}
	v1 := placedV1()
	v1.Amount = "1.005"
	if _, err := events.UpcastOrderPlacedV1(v1); !errors.Is(err, events.ErrBrokenContract) {
		t.Errorf("upcasting amount 1.005: %v; want ErrBrokenContract", err)
	}
}

func TestDecode_UnknownVersionIsParkedWithAReason(t *testing.T) {
	t.Parallel()
	msg, _ := events.Message(placedV2(), "orders")
	msg.EventVersion = 3
	_, err := events.Decode(eventtest.Delivered(t, msg))
	if !errors.Is(err, events.ErrUnknownVersion) || !errors.Is(err, inbox.ErrPermanent) {
		t.Fatalf("Decode of OrderPlaced v3: %v; want ErrUnknownVersion and inbox.ErrPermanent", err)
	}
	if !strings.Contains(err.Error(), "OrderPlaced version 3") || !strings.Contains(err.Error(), "versions 1 to 2") {
		t.Errorf("the reason %q does not say which version came and which are known", err)
	}

	paid, _ := events.Message(events.OrderPaid{OrderID: orderID, Version: 2, PaidAt: at}, "orders")
	paid.EventVersion = 2
	if _, err := events.Decode(eventtest.Delivered(t, paid)); !errors.Is(err, events.ErrUnknownVersion) || !errors.Is(err, inbox.ErrPermanent) {
		t.Errorf("Decode of OrderPaid v2: %v; want ErrUnknownVersion and inbox.ErrPermanent", err)
	}
}

func TestDecode_UnknownEventTypeIsSkippableNotPermanent(t *testing.T) {
	t.Parallel()
	msg, _ := events.Message(placedV2(), "orders")
	msg.EventType = "OrderGiftWrapped"
	_, err := events.Decode(eventtest.Delivered(t, msg))
	if !errors.Is(err, events.ErrUnknownEventType) || errors.Is(err, inbox.ErrPermanent) {
		t.Fatalf("Decode of an unknown type: %v; want ErrUnknownEventType, not permanent", err)
	}
}

func TestDecode_IgnoresUnknownFields(t *testing.T) {
	t.Parallel()
	msg, _ := events.Message(events.OrderPaid{OrderID: orderID, Version: 2, PaidAt: at}, "orders")
	msg.Payload = []byte(strings.Replace(string(msg.Payload), "{", `{"paymentMethod":"card",`, 1))
	if _, err := events.Decode(eventtest.Delivered(t, msg)); err != nil {
		t.Fatalf("an added optional field broke decoding: %v", err)
	}
}

func TestDecode_BrokenContractIsParkedNamingTheField(t *testing.T) {
	t.Parallel()
	good, _ := events.Message(placedV2(), "orders")
	v1, _ := events.Message(placedV1(), "orders")
	cases := []struct {
		name, payload, reason string
		edit                  func(m *inbox.Message)
	}{
		{name: "not JSON", payload: `{"orderId":`, reason: "payload"},
		{name: "total as a decimal string", payload: strings.Replace(string(good.Payload), `{"amountMinor":15000,"currency":"EUR"}`, `"150.00"`, 1), reason: "total"},
		{name: "missing customer", payload: strings.Replace(string(good.Payload), `"customerId":"C-42",`, "", 1), reason: "customerId is missing"},
		{name: "zero amount", payload: strings.Replace(string(good.Payload), `15000`, `0`, 1), reason: "total.amountMinor"},
		{name: "unknown currency", payload: strings.Replace(string(good.Payload), `"EUR"`, `"XXX"`, 1), reason: "total.currency"},
		{name: "missing items in v2", payload: strings.Replace(string(good.Payload), `"items":[{"sku":"BOOK-1","quantity":2}],`, "", 1), reason: "items is missing"},
		{name: "zero quantity", payload: strings.Replace(string(good.Payload), `"quantity":2`, `"quantity":0`, 1), reason: "items[0].quantity"},
		{name: "placed with version 2", payload: strings.Replace(string(good.Payload), `"version":1`, `"version":2`, 1), reason: "version must be 1"},
		{name: "v1 amount as a number", payload: strings.Replace(string(v1.Payload), `"150.00"`, `150.0`, 1), reason: "amount",
			edit: func(m *inbox.Message) { m.EventVersion = 1 }},
		{name: "v1 amount with three decimals", payload: strings.Replace(string(v1.Payload), `"150.00"`, `"150.001"`, 1), reason: "amount",
			edit: func(m *inbox.Message) { m.EventVersion = 1 }},
		{name: "key is another order", payload: string(good.Payload), reason: "key",
			edit: func(m *inbox.Message) { m.AggregateID = "someone-else" }},
		{name: "another aggregate type", payload: string(good.Payload), reason: "aggregate type",
			edit: func(m *inbox.Message) { m.AggregateType = "Customer" }},
		{name: "not JSON content", payload: string(good.Payload), reason: "content type",
			edit: func(m *inbox.Message) { m.ContentType = "application/avro" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			m := eventtest.Delivered(t, good)
			m.Payload = []byte(c.payload)
			if c.edit != nil {
				c.edit(&m)
			}
			_, err := events.Decode(m)
			if !errors.Is(err, events.ErrBrokenContract) || !errors.Is(err, inbox.ErrPermanent) {
				t.Fatalf("Decode: %v; want ErrBrokenContract and inbox.ErrPermanent", err)
			}
			if !strings.Contains(err.Error(), c.reason) {
				t.Errorf("reason %q does not mention %q", err, c.reason)
			}
		})
	}
}

func TestMessage_RefusesAPayloadThatBreaksItsContract(t *testing.T) {
	t.Parallel()
	bad := placedV2()
	bad.Total.Currency = "eur"
	bad.Items = nil
	_, err := events.Message(bad, "orders")
	if !errors.Is(err, events.ErrBrokenContract) || !strings.Contains(err.Error(), "total.currency") || !strings.Contains(err.Error(), "items") {
		t.Fatalf("Message: %v; want ErrBrokenContract naming total.currency and items", err)
	}
	if errors.Is(err, inbox.ErrPermanent) {
		t.Error("a producer's error should not claim to be a consumer's permanent error")
	}
	if _, err := events.Message(events.OrderCancelled{OrderID: orderID, Version: 2, PreviousStatus: "SHIPPED", CancelledAt: at}, "orders"); err == nil {
		t.Error("OrderCancelled from SHIPPED was accepted")
	}
}

func ExampleDecode() {
	// What the relay delivers for an order placed by a producer still on
	// version 1 ...
	v1 := `{"orderId":"o-1","customerId":"C-42","amount":"19.90","currency":"EUR","version":1,"placedAt":"2026-03-01T12:30:00Z"}`
	msg := inbox.Message{EventType: "OrderPlaced", EventVersion: 1, AggregateType: "Order", AggregateID: "o-1",
		ContentType: "application/json", Payload: []byte(v1)}

	// ... reaches the handler in the current shape.
	ev, err := events.Decode(msg)
	if err != nil {
		panic(err)
	}
	placed := ev.(events.OrderPlaced)
	fmt.Println(placed.Total.AmountMinor, placed.Total.Currency, len(placed.Items))

	// A version from the future is refused, for the runner to park.
	msg.EventVersion = 3
	_, err = events.Decode(msg)
	fmt.Println(errors.Is(err, inbox.ErrPermanent))
	// Output:
	// 1990 EUR 0
	// true
}

package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/examples/orders/money"
	"github.com/outbox-dev/outbox/inbox"
)

// The default topics and the aggregate types of the events.
const (
	// TopicOrders is the default topic of the order events.
	TopicOrders = "orders"
	// TopicInventory is the default topic of the inventory's events.
	TopicInventory = "inventory"

	// AggregateOrder is the aggregate of the order events; the aggregate
	// id (the Kafka key) is the order id.
	AggregateOrder = "Order"
	// AggregateReservation is the aggregate of the inventory's events: the
	// stock reservation of one order, whose id is the order id.
	AggregateReservation = "Reservation"
)

// The event types.
const (
	TypeOrderPlaced    = "OrderPlaced"
	TypeOrderPaid      = "OrderPaid"
	TypeOrderShipped   = "OrderShipped"
	TypeOrderCancelled = "OrderCancelled"
	TypeStockReserved  = "StockReserved"
	TypeStockRejected  = "StockRejected"
	TypeStockReleased  = "StockReleased"
)

// The order states that OrderCancelled.PreviousStatus names.
const (
	StatusPlaced = "PLACED"
	StatusPaid   = "PAID"
)

// The problems a StockRejected line names.
const (
	ProblemUnknownSKU        = "unknown_sku"
	ProblemInsufficientStock = "insufficient_stock"
)

// Errors of [Decode] and [Message]. Those that wrap [inbox.ErrPermanent]
// say so; a consumer's runner parks such a message at once.
var (
	// ErrUnknownEventType: the event type is none of this package's. It
	// does not wrap inbox.ErrPermanent: a topic may carry events a consumer
	// does not care about, and new types may appear; skip them.
	ErrUnknownEventType = errors.New("events: unknown event type")
	// ErrUnknownVersion: the event type is known but its version is not,
	// typically a producer that was upgraded before its consumers. Wrapped
	// together with inbox.ErrPermanent.
	ErrUnknownVersion = errors.New("events: unknown event version")
	// ErrBrokenContract: the message does not keep its contract (not JSON,
	// a missing or invalid field, a key that is not the payload's order).
	// Wrapped together with inbox.ErrPermanent by Decode; Message returns
	// it alone, for a payload a producer must not publish.
	ErrBrokenContract = errors.New("events: payload breaks its contract")
)

// Event is one of this package's payloads. Each knows its type, contract
// version and aggregate; [Message] needs nothing else to build an outbox
// message from it.
type Event interface {
	EventType() string
	EventVersion() int
	AggregateType() string
	AggregateID() string
	// validate checks the payload against its contract.
	validate() error
}

// Item is one line of an order: a stock keeping unit and how many.
type Item struct {
	// SKU identifies the product. 1-64 characters of letters, digits,
	// '.', '_' and '-'.
	SKU string `json:"sku"`
	// Quantity is at least 1.
	Quantity int `json:"quantity"`
}

// Money is an amount in minor units of a currency: 15000 EUR is 150.00 EUR.
type Money struct {
	// AmountMinor is the amount in minor units (cents), 0 to
	// money.MaxAmountMinor.
	AmountMinor int64 `json:"amountMinor"`
	// Currency is an ISO 4217 code accepted by money.IsCurrency.
	Currency string `json:"currency"`
}

// OrderPlaced (version 2) says an order was placed. Aggregate Order, key
// the order id.
type OrderPlaced struct {
	OrderID    string `json:"orderId"`
	CustomerID string `json:"customerId"`
	// Total is what the customer pays, in minor units. (Version 1 had a
	// decimal string "amount" and a "currency" instead.)
	Total Money `json:"total"`
	// Items are the order's lines; an empty list when it has none.
	Items []Item `json:"items"`
	// Version is the order's version: always 1 for OrderPlaced.
	Version  int64     `json:"version"`
	PlacedAt time.Time `json:"placedAt"`
}

// OrderPlacedV1 is version 1 of OrderPlaced, still accepted from producers
// that have not moved to version 2. [Decode] upcasts it to [OrderPlaced].
type OrderPlacedV1 struct {
	OrderID    string `json:"orderId"`
	CustomerID string `json:"customerId"`
	// Amount is what the customer pays, as a decimal string with at most
	// two decimals ("150.00").
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
	// Items may be absent, meaning none.
	Items    []Item    `json:"items,omitempty"`
	Version  int64     `json:"version"`
	PlacedAt time.Time `json:"placedAt"`
}

// OrderPaid says an order was paid.
type OrderPaid struct {
	OrderID string    `json:"orderId"`
	Version int64     `json:"version"`
	PaidAt  time.Time `json:"paidAt"`
}

// OrderShipped says a paid order was shipped.
type OrderShipped struct {
	OrderID   string    `json:"orderId"`
	Version   int64     `json:"version"`
	ShippedAt time.Time `json:"shippedAt"`
}

// OrderCancelled says an order was cancelled before it was shipped.
type OrderCancelled struct {
	OrderID string `json:"orderId"`
	Version int64  `json:"version"`
	// PreviousStatus is the state the order was cancelled in: PLACED, or
	// PAID (then the customer is owed a refund).
	PreviousStatus string    `json:"previousStatus"`
	CancelledAt    time.Time `json:"cancelledAt"`
}

// StockReserved says the inventory reserved an order's items. Aggregate
// Reservation, key the order id.
type StockReserved struct {
	OrderID    string    `json:"orderId"`
	Items      []Item    `json:"items"`
	ReservedAt time.Time `json:"reservedAt"`
}

// StockRejected says the inventory could not reserve an order's items and
// reserved none of them.
type StockRejected struct {
	OrderID string `json:"orderId"`
	// Lines are the items that could not be reserved (at least one).
	Lines      []RejectedLine `json:"lines"`
	RejectedAt time.Time      `json:"rejectedAt"`
}

// RejectedLine is an item the inventory could not reserve, and why.
type RejectedLine struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
	// Available is the stock there was: 0 for an unknown SKU.
	Available int64 `json:"available"`
	// Problem is unknown_sku or insufficient_stock.
	Problem string `json:"problem"`
}

// StockReleased says the inventory gave back the stock of a cancelled
// order's reservation.
type StockReleased struct {
	OrderID    string    `json:"orderId"`
	Items      []Item    `json:"items"`
	ReleasedAt time.Time `json:"releasedAt"`
}

func (OrderPlaced) EventType() string        { return TypeOrderPlaced }
func (OrderPlaced) EventVersion() int        { return 2 }
func (OrderPlaced) AggregateType() string    { return AggregateOrder }
func (e OrderPlaced) AggregateID() string    { return e.OrderID }
func (OrderPlacedV1) EventType() string      { return TypeOrderPlaced }
func (OrderPlacedV1) EventVersion() int      { return 1 }
func (OrderPlacedV1) AggregateType() string  { return AggregateOrder }
func (e OrderPlacedV1) AggregateID() string  { return e.OrderID }
func (OrderPaid) EventType() string          { return TypeOrderPaid }
func (OrderPaid) EventVersion() int          { return 1 }
func (OrderPaid) AggregateType() string      { return AggregateOrder }
func (e OrderPaid) AggregateID() string      { return e.OrderID }
func (OrderShipped) EventType() string       { return TypeOrderShipped }
func (OrderShipped) EventVersion() int       { return 1 }
func (OrderShipped) AggregateType() string   { return AggregateOrder }
func (e OrderShipped) AggregateID() string   { return e.OrderID }
func (OrderCancelled) EventType() string     { return TypeOrderCancelled }
func (OrderCancelled) EventVersion() int     { return 1 }
func (OrderCancelled) AggregateType() string { return AggregateOrder }
func (e OrderCancelled) AggregateID() string { return e.OrderID }
func (StockReserved) EventType() string      { return TypeStockReserved }
func (StockReserved) EventVersion() int      { return 1 }
func (StockReserved) AggregateType() string  { return AggregateReservation }
func (e StockReserved) AggregateID() string  { return e.OrderID }
func (StockRejected) EventType() string      { return TypeStockRejected }
func (StockRejected) EventVersion() int      { return 1 }
func (StockRejected) AggregateType() string  { return AggregateReservation }
func (e StockRejected) AggregateID() string  { return e.OrderID }
func (StockReleased) EventType() string      { return TypeStockReleased }
func (StockReleased) EventVersion() int      { return 1 }
func (StockReleased) AggregateType() string  { return AggregateReservation }
func (e StockReleased) AggregateID() string  { return e.OrderID }

// Message returns the outbox message that publishes e on topic: aggregate
// type and id (the Kafka key), event type and version from e, the JSON
// payload, and the order id as correlation id. Set CausationID on the
// result when the event was caused by another. A payload that breaks its
// contract gives an error wrapping [ErrBrokenContract]: a producer must not
// publish what its consumers would park.
func Message(e Event, topic string) (outbox.Message, error) {
	if err := e.validate(); err != nil {
		return outbox.Message{}, fmt.Errorf("%w: %s v%d: %v", ErrBrokenContract, e.EventType(), e.EventVersion(), err)
	}
	payload, err := json.Marshal(e)
	if err != nil {
		return outbox.Message{}, fmt.Errorf("events: encode %s: %w", e.EventType(), err)
	}
	return outbox.Message{
		AggregateType: e.AggregateType(),
		AggregateID:   e.AggregateID(),
		EventType:     e.EventType(),
		EventVersion:  e.EventVersion(),
		Topic:         topic,
		Payload:       payload,
		ContentType:   outbox.ContentTypeJSON,
		CorrelationID: e.AggregateID(),
	}, nil
}

// Decode reads a delivered message as the current version of its event:
// OrderPlaced (v1 upcast to v2), OrderPaid, OrderShipped, OrderCancelled,
// StockReserved, StockRejected or StockReleased, as a value of that type.
//
// An event type this package does not know gives [ErrUnknownEventType].
// A version it does not know gives an error wrapping [ErrUnknownVersion]
// and [inbox.ErrPermanent]; a payload that is not JSON, misses a field,
// has an invalid value or names another aggregate than the message's key
// gives one wrapping [ErrBrokenContract] and [inbox.ErrPermanent].
func Decode(msg inbox.Message) (Event, error) {
	dec, ok := decoders[msg.EventType]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownEventType, msg.EventType)
	}
	decode, ok := dec[msg.EventVersion]
	if !ok {
		return nil, fmt.Errorf("%w (%w): %s version %d (this consumer knows %s)",
			ErrUnknownVersion, inbox.ErrPermanent, msg.EventType, msg.EventVersion, knownVersions(dec))
	}
	broken := func(format string, args ...any) error {
		return fmt.Errorf("%w (%w): %s v%d: %s", ErrBrokenContract, inbox.ErrPermanent,
			msg.EventType, msg.EventVersion, fmt.Sprintf(format, args...))
	}
	if msg.ContentType != "" && !outbox.IsJSON(msg.ContentType) {
		return nil, broken("content type %q is not JSON", msg.ContentType)
	}
	ev, err := decode(msg.Payload)
	if err != nil {
		return nil, broken("%v", err)
	}
	if msg.AggregateType != "" && msg.AggregateType != ev.AggregateType() {
		return nil, broken("aggregate type %q, want %q", msg.AggregateType, ev.AggregateType())
	}
	if msg.AggregateID != ev.AggregateID() {
		return nil, broken("key (aggregate id) %q is not the payload's orderId %q", msg.AggregateID, ev.AggregateID())
	}
	return ev, nil
}

// decoders holds, per event type and version, a function that decodes and
// validates the payload and returns the event in its current shape.
var decoders = map[string]map[int]func([]byte) (Event, error){
	TypeOrderPlaced: {
		1: func(b []byte) (Event, error) {
			var v1 OrderPlacedV1
			if err := json.Unmarshal(b, &v1); err != nil {
				return nil, fmt.Errorf("payload: %w", err)
			}
			return upcastOrderPlacedV1(v1)
		},
		2: decodeAs[OrderPlaced],
	},
	TypeOrderPaid:      {1: decodeAs[OrderPaid]},
	TypeOrderShipped:   {1: decodeAs[OrderShipped]},
	TypeOrderCancelled: {1: decodeAs[OrderCancelled]},
	TypeStockReserved:  {1: decodeAs[StockReserved]},
	TypeStockRejected:  {1: decodeAs[StockRejected]},
	TypeStockReleased:  {1: decodeAs[StockReleased]},
}

// decodeAs unmarshals b into a T and validates it. Unknown fields are
// ignored: adding an optional field is a compatible change.
func decodeAs[T Event](b []byte) (Event, error) {
	var e T
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	if err := e.validate(); err != nil {
		return nil, err
	}
	return e, nil
}

func knownVersions(dec map[int]func([]byte) (Event, error)) string {
	highest := 0
	for v := range dec {
		highest = max(highest, v)
	}
	if len(dec) == 1 {
		return fmt.Sprintf("version %d", highest)
	}
	return fmt.Sprintf("versions 1 to %d", highest)
}

// UpcastOrderPlacedV1 turns a version 1 OrderPlaced into version 2: the
// decimal amount becomes minor units in Total, missing items an empty
// list. It is the only code that knows how the two versions differ. An
// amount that is not a valid decimal with at most two decimals gives an
// error wrapping [ErrBrokenContract].
func UpcastOrderPlacedV1(v1 OrderPlacedV1) (OrderPlaced, error) {
	e, err := upcastOrderPlacedV1(v1)
	if err != nil {
		return OrderPlaced{}, fmt.Errorf("%w: OrderPlaced v1: %v", ErrBrokenContract, err)
	}
	return e, nil
}

// upcastOrderPlacedV1 is UpcastOrderPlacedV1 with the contract error
// unwrapped, for Decode to wrap.
func upcastOrderPlacedV1(v1 OrderPlacedV1) (OrderPlaced, error) {
	if err := v1.validate(); err != nil {
		return OrderPlaced{}, err
	}
	minor, _ := money.ParseAmount(v1.Amount) // validate parsed it already
	items := v1.Items
	if items == nil {
		items = []Item{}
	}
	return OrderPlaced{
		OrderID:    v1.OrderID,
		CustomerID: v1.CustomerID,
		Total:      Money{AmountMinor: minor, Currency: v1.Currency},
		Items:      items,
		Version:    v1.Version,
		PlacedAt:   v1.PlacedAt,
	}, nil
}

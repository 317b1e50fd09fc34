// Package events holds the order system's event contracts: one payload
// type per event and version, what producers encode and what consumers
// decode. They are external contracts, kept apart from the services'
// internal types on purpose: an order service may rename a column or a
// struct field, but a published payload changes only by a new version.
// docs/events.md documents every field.
//
// # Producing
//
// A producer builds the payload and turns it into an outbox message with
// [Message], which sets the aggregate (the Kafka key), the event type and
// the event version:
//
//	msg, err := events.Message(events.OrderPaid{OrderID: id, Version: 2, PaidAt: now}, "orders")
//	...
//	err = store.Enqueue(ctx, tx, msg) // in the transaction that changed the order
//
// # Consuming
//
// A consumer decodes a delivered message with [Decode] and switches on the
// type. Decode accepts every version this package knows and returns the
// current shape: an OrderPlaced v1 is upcast to v2 by [UpcastOrderPlacedV1],
// the one place that knows how the two differ, so a handler is written
// against one shape only.
//
//	ev, err := events.Decode(msg)
//	switch {
//	case errors.Is(err, events.ErrUnknownEventType):
//		return nil // not for us; the inbox records it as processed
//	case err != nil:
//		return err // wraps inbox.ErrPermanent: parked as a dead letter
//	}
//	switch e := ev.(type) {
//	case events.OrderPlaced: ...
//	}
//
// An event version this package does not know (a producer that upgraded
// before its consumers) and a payload that breaks its contract give errors
// wrapping [inbox.ErrPermanent], so the consumer parks the message with the
// reason instead of processing it wrongly or retrying it forever.
//
// # Versions
//
// The eventVersion header is the version of the payload's contract.
// Adding an optional field is a compatible change and keeps the version;
// removing or renaming a field, or changing what a field means, is a new
// version. OrderPlaced went through one: v1 carried the amount as a decimal
// string ("amount": "150.00", "currency": "EUR"); v2 carries it as an
// integer number of minor units in a total object
// ("total": {"amountMinor": 15000, "currency": "EUR"}), which every
// language sums exactly. The payload field "version", by contrast, is the
// order's own version: 1 for OrderPlaced, then 2, 3, ... for each later
// event of the same order, so that any reader can check their order.
package events

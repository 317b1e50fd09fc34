package outbox_test

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/trace"

	"github.com/outbox-dev/outbox"
)

// Prepare fills in the defaults a store applies before it writes a message.
func ExamplePrepare() {
	msgs, err := outbox.Prepare(context.Background(), outbox.Limits{}, []outbox.Message{{
		AggregateType: "Order",
		AggregateID:   "order-42",
		EventType:     "OrderPlaced",
		Payload:       []byte(`{"orderId":"order-42","total":12.5}`),
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	m := msgs[0]
	fmt.Println("id is a UUIDv7:", m.ID.Version() == 7)
	fmt.Println("event version:", m.EventVersion)
	fmt.Println("content type:", m.ContentType)
	fmt.Printf("traceparent: %q\n", m.TraceParent)
	// Output:
	// id is a UUIDv7: true
	// event version: 1
	// content type: application/json
	// traceparent: ""
}

// With an OpenTelemetry span in the context, Prepare stores its traceparent
// so that consumers can continue the trace.
func ExamplePrepare_traceParent() {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)

	msgs, err := outbox.Prepare(ctx, outbox.Limits{}, []outbox.Message{{
		AggregateType: "Order",
		AggregateID:   "order-42",
		EventType:     "OrderPlaced",
		Payload:       []byte(`{}`),
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(msgs[0].TraceParent)
	// Output:
	// 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
}

// Validate reports the first rule a batch breaks, naming the message by its
// index and the field as it appears in the Kafka headers.
func ExampleValidate() {
	err := outbox.Validate(outbox.Limits{},
		outbox.Message{AggregateType: "Order", AggregateID: "order-42", EventType: "OrderPlaced", Payload: []byte(`{}`)},
		outbox.Message{AggregateType: "Order", AggregateID: "order-43", EventType: "OrderPlaced", Payload: []byte(`{"total":`)},
	)
	fmt.Println(err)

	err = outbox.Validate(outbox.Limits{MaxPayloadBytes: 4}, outbox.Message{
		AggregateType: "Order", AggregateID: "order-42", EventType: "OrderPlaced",
		ContentType: "text/plain", Payload: []byte("placed"),
	})
	fmt.Println(err)

	err = outbox.Validate(outbox.Limits{}, outbox.Message{
		AggregateType: "Order", AggregateID: "order-42", EventType: "OrderPlaced", Payload: []byte(`{}`),
		Headers: map[string]string{"EventID": "mine"},
	})
	fmt.Println(err)
	// Output:
	// outbox: invalid message 1: payload: must be valid JSON for content type application/json
	// outbox: invalid message 0: payload: must be at most 4 bytes, is 6
	// outbox: invalid message 0: headers["EventID"]: name is reserved: the relay sets eventId itself
}

// Callers branch on ErrInvalidMessage with errors.Is, and get the details
// with errors.As, also through the stores' Enqueue, which return the error
// as is.
func ExampleValidationError() {
	err := outbox.Validate(outbox.Limits{}, outbox.Message{
		AggregateType: "Order",
		AggregateID:   " order-42",
		EventType:     "OrderPlaced",
		Payload:       []byte(`{}`),
	})
	if errors.Is(err, outbox.ErrInvalidMessage) {
		fmt.Println("rejected; do not retry")
	}
	var ve *outbox.ValidationError
	if errors.As(err, &ve) {
		fmt.Println("index:", ve.Index)
		fmt.Println("field:", ve.Field)
		fmt.Println("rule:", ve.Rule)
	}
	// Output:
	// rejected; do not retry
	// index: 0
	// field: aggregateId
	// rule: must not start or end with white space
}

// IsJSON decides whether a payload must be valid JSON.
func ExampleIsJSON() {
	for _, ct := range []string{"application/json", "application/cloudevents+json; charset=utf-8", "text/plain", "application/avro"} {
		fmt.Printf("%s: %v\n", ct, outbox.IsJSON(ct))
	}
	// Output:
	// application/json: true
	// application/cloudevents+json; charset=utf-8: true
	// text/plain: false
	// application/avro: false
}

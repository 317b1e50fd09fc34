// Package eventtest turns outbox messages into inbox messages as a consumer
// would receive them after the relay published them, for the order
// system's tests.
package eventtest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/inbox"
)

// Delivered returns msg as delivered: defaults filled in as Enqueue fills
// them (id, event version, content type), and the headers the relay sets.
func Delivered(t testing.TB, msg outbox.Message) inbox.Message {
	t.Helper()
	prepared, err := outbox.Prepare(context.Background(), outbox.Limits{}, []outbox.Message{msg})
	if err != nil {
		t.Fatalf("eventtest: %v", err)
	}
	m := prepared[0]
	headers := map[string]string{
		"eventId": m.ID.String(), "eventType": m.EventType, "eventVersion": strconv.Itoa(m.EventVersion),
		"aggregateType": m.AggregateType, "aggregateId": m.AggregateID, "contentType": m.ContentType,
		"correlationId": m.CorrelationID, "causationId": m.CausationID,
	}
	return inbox.Message{
		ID: m.ID, EventType: m.EventType, EventVersion: m.EventVersion,
		AggregateType: m.AggregateType, AggregateID: m.AggregateID,
		CorrelationID: m.CorrelationID, CausationID: m.CausationID, ContentType: m.ContentType,
		Headers: headers, Payload: m.Payload, Topic: m.Topic, Timestamp: time.Now(),
	}
}

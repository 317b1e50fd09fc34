package inbox_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox/inbox"
)

func record(headers ...string) *kgo.Record {
	r := &kgo.Record{Topic: "orders", Partition: 1, Offset: 7, Key: []byte("o-1"), Value: []byte(`{}`),
		Timestamp: time.Unix(1700000000, 0)}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: headers[i], Value: []byte(headers[i+1])})
	}
	return r
}

func TestFromRecord_ReadsTheRecordContract(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	m, err := inbox.FromRecord(record("eventId", id.String(), "eventType", "OrderPlaced", "eventVersion", "2",
		"aggregateType", "Order", "correlationId", "c-1", "causationId", "x-1", "traceparent", "tp",
		"contentType", "application/json", "tenant", "acme"))
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != id || m.EventType != "OrderPlaced" || m.EventVersion != 2 || m.AggregateType != "Order" ||
		m.AggregateID != "o-1" || m.CorrelationID != "c-1" || m.CausationID != "x-1" || m.TraceParent != "tp" ||
		m.ContentType != "application/json" || m.Headers["tenant"] != "acme" ||
		m.Topic != "orders" || m.Partition != 1 || m.Offset != 7 || string(m.Payload) != "{}" {
		t.Errorf("FromRecord = %+v", m)
	}
}

func TestFromRecord_Defaults(t *testing.T) {
	t.Parallel()
	m, err := inbox.FromRecord(record("eventId", uuid.NewString(), "aggregateId", "o-2"))
	if err != nil {
		t.Fatal(err)
	}
	if m.EventVersion != 1 || m.AggregateID != "o-2" {
		t.Errorf("version %d aggregate %q; want 1 and the aggregateId header over the key", m.EventVersion, m.AggregateID)
	}
}

func TestFromRecord_RejectsWhatBreaksTheContract(t *testing.T) {
	t.Parallel()
	for name, r := range map[string]*kgo.Record{
		"no eventId":        record("eventType", "OrderPlaced"),
		"eventId not UUID":  record("eventId", "42", "eventType", "OrderPlaced"),
		"eventVersion zero": record("eventId", uuid.NewString(), "eventVersion", "0"),
		"eventVersion text": record("eventId", uuid.NewString(), "eventVersion", "v2"),
	} {
		m, err := inbox.FromRecord(r)
		if !errors.Is(err, inbox.ErrMalformed) {
			t.Errorf("%s: error = %v, want ErrMalformed", name, err)
		}
		// What could be read is kept, so the record can be parked.
		if m.Topic != "orders" || m.Offset != 7 || string(m.Payload) != "{}" || len(m.Headers) == 0 {
			t.Errorf("%s: message %+v lost what could be read", name, m)
		}
	}
}

package inbox

import (
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Message is one delivered event as a consumer sees it: the outbox's
// record contract (key = aggregate id, headers eventId, eventType, ...)
// read back from a Kafka record.
type Message struct {
	// ID is the eventId header: the key of the inbox.
	ID            uuid.UUID
	EventType     string
	EventVersion  int
	AggregateType string
	AggregateID   string
	CorrelationID string
	CausationID   string
	TraceParent   string
	ContentType   string
	// Headers are all record headers, the contract's included.
	Headers map[string]string
	Payload []byte

	// Where the record was read from.
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
}

// FromRecord reads a Message from a Kafka record written by the outbox
// relay. It fails when eventId is missing or not a UUID, or eventVersion is
// not a positive integer (a missing eventVersion means 1). The error wraps
// [ErrMalformed]; the Message returned with it holds everything that could
// be read (headers, payload, key, topic, partition, offset), so that it can
// be parked.
func FromRecord(r *kgo.Record) (Message, error) {
	m := Message{
		Headers: make(map[string]string, len(r.Headers)), Payload: r.Value,
		AggregateID: string(r.Key), Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp,
	}
	for _, h := range r.Headers {
		m.Headers[h.Key] = string(h.Value)
	}
	return m, m.readHeaders()
}

// readHeaders fills the contract's fields from m.Headers. The aggregateId
// header, when present, wins over the AggregateID already set (the key).
// Fields that cannot be read are left zero and reported with ErrMalformed;
// the others are filled anyway.
func (m *Message) readHeaders() error {
	var err error
	m.EventVersion = 1
	if v, ok := m.Headers["eventVersion"]; ok {
		n, perr := strconv.Atoi(v)
		if perr != nil || n < 1 {
			m.EventVersion = 0
			err = fmt.Errorf("%w: header eventVersion %q is not a positive integer", ErrMalformed, v)
		} else {
			m.EventVersion = n
		}
	}
	id, perr := uuid.Parse(m.Headers["eventId"])
	if perr != nil {
		err = fmt.Errorf("%w: header eventId %q is not a UUID", ErrMalformed, m.Headers["eventId"])
	} else {
		m.ID = id
	}
	m.EventType = m.Headers["eventType"]
	m.AggregateType = m.Headers["aggregateType"]
	if a, ok := m.Headers["aggregateId"]; ok {
		m.AggregateID = a
	}
	m.CorrelationID = m.Headers["correlationId"]
	m.CausationID = m.Headers["causationId"]
	m.TraceParent = m.Headers["traceparent"]
	m.ContentType = m.Headers["contentType"]
	return err
}

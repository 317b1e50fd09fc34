package kafka

import (
	"maps"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox"
)

// The Kafka headers every record carries, in the order they are written.
// [HeaderTraceParent] is written only when the message has a traceparent.
const (
	HeaderEventID       = "eventId"
	HeaderEventType     = "eventType"
	HeaderEventVersion  = "eventVersion"
	HeaderAggregateType = "aggregateType"
	HeaderAggregateID   = "aggregateId"
	HeaderCorrelationID = "correlationId"
	HeaderCausationID   = "causationId"
	HeaderTraceParent   = "traceparent"
	HeaderContentType   = "contentType"
)

// Record builds the Kafka record for rec on topic: the key is the aggregate
// id, the value the payload, and the headers are eventId (the UUID in its
// canonical text form), eventType, eventVersion (decimal), aggregateType,
// aggregateId, correlationId, causationId (both possibly empty),
// traceparent (only when set) and contentType, followed by the message's
// own headers sorted by name.
//
// A message cannot speak for itself in the relay's headers: Record refuses
// rec when its own headers break the rules Enqueue applies under limits
// ([outbox.ValidateHeaders]): a name that is one of
// [outbox.ReservedHeaders] in any case, an invalid name, a value that is
// not UTF-8 or is longer than limits.MaxHeaderValueBytes, more than
// limits.MaxHeaders entries. Enqueue refuses such a message; a row written
// into the outbox table with plain SQL bypasses it, and is caught here.
// So is a record the store could not read whole ([outbox.Record.Invalid]:
// headers that are not a JSON object of string values), refused with that
// reason. The error wraps [outbox.ErrInvalidMessage] and is a
// *[outbox.ValidationError] naming the header and the rule. [Sink.Publish]
// returns it as a permanent error, so the relay dead-letters the message
// with that reason rather than publish it with headers removed: it stays
// whole in the outbox, to be corrected and replayed, or discarded.
//
// The timestamp is left zero, so the producer stamps the time of publishing
// (Kafka's CreateTime). The time the message was enqueued is not used: a
// message published late, such as a replayed dead letter, would otherwise
// carry an old timestamp, which time-based retention may delete at once and
// brokers with log.message.timestamp.before.max.ms refuse.
//
// Record is exported so that every way of publishing (the relay's sink, or
// change data capture) writes the same contract.
func Record(rec outbox.Record, topic string, limits outbox.Limits) (*kgo.Record, error) {
	if rec.Invalid != nil {
		return nil, rec.Invalid
	}
	if err := outbox.ValidateHeaders(limits, rec.Headers); err != nil {
		return nil, err
	}
	hs := make([]kgo.RecordHeader, 0, 9+len(rec.Headers))
	add := func(k, v string) { hs = append(hs, kgo.RecordHeader{Key: k, Value: []byte(v)}) }
	add(HeaderEventID, rec.ID.String())
	add(HeaderEventType, rec.EventType)
	add(HeaderEventVersion, strconv.Itoa(rec.EventVersion))
	add(HeaderAggregateType, rec.AggregateType)
	add(HeaderAggregateID, rec.AggregateID)
	add(HeaderCorrelationID, rec.CorrelationID)
	add(HeaderCausationID, rec.CausationID)
	if rec.TraceParent != "" {
		add(HeaderTraceParent, rec.TraceParent)
	}
	add(HeaderContentType, rec.ContentType)
	for _, name := range slices.Sorted(maps.Keys(rec.Headers)) {
		add(name, rec.Headers[name])
	}
	return &kgo.Record{
		Topic:   topic,
		Key:     []byte(rec.AggregateID),
		Value:   rec.Payload,
		Headers: hs,
	}, nil
}

package outbox

import (
	"time"

	"github.com/google/uuid"
)

// ContentTypeJSON is the default content type of a message payload.
const ContentTypeJSON = "application/json"

// Message is one event to publish: what the application passes to Enqueue.
//
// Only AggregateType, AggregateID, EventType and Payload are required; the
// rest have defaults that [Prepare] fills in.
type Message struct {
	// ID identifies the event everywhere: the outbox row, the Kafka header
	// eventId, and the consumer's inbox. Defaults to a new UUIDv7.
	ID uuid.UUID
	// AggregateType is the kind of entity the event is about ("Order").
	// Required.
	AggregateType string
	// AggregateID identifies the entity. It is the Kafka record key and the
	// ordering key: events of one (AggregateType, AggregateID) are published
	// in order. Required.
	AggregateID string
	// EventType names what happened ("OrderPlaced"). Required.
	EventType string
	// EventVersion is the version of the event's contract. Defaults to 1.
	EventVersion int
	// Topic is the Kafka topic. Defaults to empty, meaning the relay's routing
	// rule decides.
	Topic string
	// Payload is the event body. With a JSON content type it must be valid
	// JSON. Required.
	Payload []byte
	// ContentType of the payload. Defaults to [ContentTypeJSON].
	ContentType string
	// Headers are extra Kafka headers, written after the relay's own. Names
	// are 1-255 characters of letters, digits, '.', '_' and '-', and must
	// not be one of the headers the relay sets itself (see
	// [ReservedHeaders]), in any case. Values are valid UTF-8. There are at
	// most Limits.MaxHeaders of them (64 by default), each value at most
	// Limits.MaxHeaderValueBytes long (8192 bytes by default). Optional.
	Headers map[string]string
	// CorrelationID ties together all events of one business process.
	// Optional.
	CorrelationID string
	// CausationID is the id of the message or command that caused this one.
	// Optional.
	CausationID string
	// TraceParent is a W3C traceparent. Defaults to the OpenTelemetry span
	// in the context passed to Enqueue, if there is one.
	TraceParent string
}

// Status is the relay state of a stored message.
type Status string

// The states of a stored message.
const (
	// StatusPending: waiting to be published for the first time.
	StatusPending Status = "PENDING"
	// StatusInFlight: claimed by a relay, which holds a lease on it.
	StatusInFlight Status = "IN_FLIGHT"
	// StatusSent: the broker acknowledged it.
	StatusSent Status = "SENT"
	// StatusFailed: a publish failed; a retry is scheduled at NextAttemptAt.
	StatusFailed Status = "FAILED"
	// StatusDeadLetter: retries ended. The message, and every later message
	// of its aggregate, waits until an operator replays or discards it.
	StatusDeadLetter Status = "DEAD_LETTER"
	// StatusDiscarded: an operator discarded a dead letter (with a reason,
	// kept for audit). It no longer blocks its aggregate.
	StatusDiscarded Status = "DISCARDED"
)

// Record is a stored message with its relay state, as a store returns it.
type Record struct {
	Message
	// Seq is the store's enqueue sequence number. Within an aggregate the
	// relay publishes in Seq order.
	Seq int64
	// CreatedAt is when the message was written, by the database clock.
	CreatedAt time.Time
	Status    Status
	// Attempts counts failed publish attempts.
	Attempts int
	// NextAttemptAt is when the message is next due.
	NextAttemptAt time.Time
	// LastError is the error of the last failed attempt.
	LastError string
	// LeaseOwner is the relay that holds the message while IN_FLIGHT.
	LeaseOwner string
	// LeaseExpiresAt is when another relay may take the message over.
	LeaseExpiresAt time.Time
	// PublishedAt is when the broker acknowledged the message.
	PublishedAt time.Time
	// Invalid is nil for every message written with Enqueue. It is set
	// when the stored row is not a message that may be published, and
	// says why: a *ValidationError naming the column and the rule, such as
	// `headers["x"]: value must be a string, is a number` for a row written
	// with plain SQL (before the table refused it) whose headers are not a
	// JSON object of string values; Headers is then nil. A store returns
	// such a row like any other instead of failing the read of the rows
	// beside it. The relay never publishes it: it dead-letters it at once
	// with this reason, and the Kafka sink refuses it.
	Invalid error
}

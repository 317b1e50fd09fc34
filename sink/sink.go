// Package sink defines what the relay publishes to. [kafka] is the
// implementation for Apache Kafka and any broker speaking its protocol.
//
// A Sink reports each record's outcome. An error that wraps [ErrPermanent]
// will never succeed (record too large, invalid or unknown topic, not
// authorized): the relay dead-letters the message at once. An error that
// wraps [ErrUnavailable] means the broker could not be reached or did not
// answer in time: not the message's fault, so the relay retries without
// counting an attempt and backs off as a whole. Any other error is
// retriable and counts as an attempt.
//
// [kafka]: github.com/outbox-dev/outbox/sink/kafka
package sink

import (
	"context"
	"errors"

	"github.com/outbox-dev/outbox"
)

var (
	// ErrPermanent marks a publish error that retrying cannot fix.
	ErrPermanent = errors.New("permanent publish error")
	// ErrUnavailable marks a publish error caused by an unreachable or
	// unresponsive broker.
	ErrUnavailable = errors.New("broker unavailable")
)

// Sink publishes records to a broker.
type Sink interface {
	// Publish sends recs, in order, and waits until the broker acknowledged
	// or refused each one, or ctx is done. It returns one error per record,
	// in the order of recs; nil means the broker acknowledged the record.
	// Records of one aggregate must be published in the order given.
	Publish(ctx context.Context, recs []outbox.Record) []error
	// Close releases the sink's connections.
	Close() error
}

// Class is how the relay treats a publish error.
type Class int

const (
	// Retriable errors count as an attempt and are retried with backoff.
	Retriable Class = iota
	// Permanent errors dead-letter the message at once.
	Permanent
	// Unavailable errors are retried without counting an attempt.
	Unavailable
)

// Classify returns the class of a publish error.
func Classify(err error) Class {
	switch {
	case errors.Is(err, ErrPermanent):
		return Permanent
	case errors.Is(err, ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return Unavailable
	}
	return Retriable
}

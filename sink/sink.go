// Package sink defines what the relay publishes to. [kafka] is the
// implementation for Apache Kafka and any broker speaking its protocol.
//
// A Sink reports each record's outcome, and who is at fault decides what
// the relay does with a failed record:
//
//   - An error that wraps [ErrPermanent] says the record itself is bad and
//     will never be accepted (too large, invalid): the relay dead-letters
//     the message at once, with the broker's reason.
//   - An error that wraps [ErrTopicUnavailable] (a [*TopicError]) says the
//     record's topic cannot take records now: it does not exist (yet), or
//     the relay may not write to it. Not the message's fault: the message waits, in
//     order, without counting an attempt, and is tried again after
//     [TopicRetryDelay]; the other topics keep flowing.
//   - An error that wraps [ErrUnavailable] says the broker could not be
//     reached or did not answer in time, or refuses the client as a whole
//     (credentials): the relay retries without counting an attempt and
//     backs off as a whole.
//   - Any other error is retriable and counts as an attempt; after the
//     relay's maximum attempts the message becomes a dead letter.
//
// [kafka]: github.com/outbox-dev/outbox/sink/kafka
package sink

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/outbox-dev/outbox"
)

var (
	// ErrPermanent marks a publish error that retrying cannot fix.
	ErrPermanent = errors.New("permanent publish error")
	// ErrUnavailable marks a publish error caused by an unreachable or
	// unresponsive broker.
	ErrUnavailable = errors.New("broker unavailable")
	// ErrTopicUnavailable marks a publish error caused by the record's
	// topic (see [TopicError]).
	ErrTopicUnavailable = errors.New("topic unavailable")
	// ErrNotSent marks the error of a record that a [RunSink] did not
	// hand to the broker: an earlier record of its aggregate in the same
	// call failed, or the sink cut the run before it (where the run changes
	// topic, for one). The relay gives it back unsent, counting no attempt;
	// it follows the earlier records in a later call.
	ErrNotSent = errors.New("not sent: it follows an earlier record of its aggregate")
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

// RunSink is implemented by a Sink that can publish a run: several
// consecutive records of one aggregate in one call. The relay hands a
// batch holding runs to PublishRuns, and a batch of one record per
// aggregate to Publish, as it does for any Sink.
type RunSink interface {
	Sink
	// PublishRuns is Publish for recs that may hold several records of one
	// aggregate, in the aggregate's order. It keeps that order without a
	// gap: a record never reaches the topic ahead of, or without, an
	// earlier record of its aggregate in recs. So when a record fails, the
	// later records of its aggregate fail too: with the error the broker
	// gave them (it refused them together) or one wrapping [ErrNotSent].
	PublishRuns(ctx context.Context, recs []outbox.Record) []error
}

// Class is how the relay treats a publish error.
type Class int

const (
	// Retriable errors count as an attempt and are retried with backoff.
	Retriable Class = iota
	// Permanent errors dead-letter the message at once.
	Permanent
	// Unavailable errors are retried without counting an attempt, and the
	// relay pauses as a whole.
	Unavailable
	// TopicUnavailable errors are retried without counting an attempt,
	// after [TopicRetryDelay]; the relay goes on with other messages.
	TopicUnavailable
)

// String names the class as metrics label it: "retriable", "permanent",
// "unavailable" or "topic_unavailable".
func (c Class) String() string {
	switch c {
	case Permanent:
		return "permanent"
	case Unavailable:
		return "unavailable"
	case TopicUnavailable:
		return "topic_unavailable"
	}
	return "retriable"
}

// Classify returns the class of a publish error.
func Classify(err error) Class {
	switch {
	case errors.Is(err, ErrPermanent):
		return Permanent
	case errors.Is(err, ErrTopicUnavailable):
		return TopicUnavailable
	case errors.Is(err, ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return Unavailable
	}
	return Retriable
}

// TopicError is a publish error that concerns a record's topic, not the
// record. errors.Is(err, [ErrTopicUnavailable]) holds for it, and so does
// errors.Is(err, e.Err).
type TopicError struct {
	// Topic is the topic the record was published to.
	Topic string
	// Err is the broker's answer, e.g. UNKNOWN_TOPIC_OR_PARTITION.
	Err error
	// Fix says what an operator does about it.
	Fix string
	// Since is when the sink first found the topic unusable, in this
	// spell.
	Since time.Time
}

func (e *TopicError) Error() string {
	msg := fmt.Sprintf("topic %s cannot take records: %v", e.Topic, e.Err)
	if e.Fix != "" {
		msg += " (" + e.Fix + ")"
	}
	return msg
}

// Unwrap returns ErrTopicUnavailable and the broker's answer.
func (e *TopicError) Unwrap() []error { return []error{ErrTopicUnavailable, e.Err} }

// Bounds of [TopicRetryDelay].
const (
	// MinTopicRetryDelay is the shortest wait of a message whose topic
	// cannot take records.
	MinTopicRetryDelay = time.Second
	// MaxTopicRetryDelay is the longest: a message goes out at most this
	// long after its topic becomes usable.
	MaxTopicRetryDelay = 10 * time.Second
)

// TopicRetryDelay is how long a message waits before it is tried again
// after err, a [TopicError], at now: half the time the topic has been
// unusable, less a random jitter of up to a fifth, at least
// [MinTopicRetryDelay] and at most [MaxTopicRetryDelay]. A topic that is
// being created costs a second or two; one that stays missing costs a
// claim of each waiting aggregate's head every few seconds.
func TopicRetryDelay(err error, now time.Time) time.Duration {
	d := MinTopicRetryDelay
	if te, ok := errors.AsType[*TopicError](err); ok && !te.Since.IsZero() {
		d = min(now.Sub(te.Since)/2, MaxTopicRetryDelay)
	}
	return max(d-time.Duration(rand.Int64N(int64(d/5)+1)), MinTopicRetryDelay)
}

// TopicStatus is what a sink knows of one topic it published to, or tried
// to, since it started.
type TopicStatus struct {
	// Topic is the topic's name.
	Topic string
	// Published counts the records the broker acknowledged.
	Published int64
	// PublishedLastHour counts those of the last hour.
	PublishedLastHour int64
	// FirstPublishedAt and LastPublishedAt are the times of the first and
	// the last acknowledgement; zero if none.
	FirstPublishedAt, LastPublishedAt time.Time
	// UnavailableSince is when the topic last became unable to take
	// records; zero while it takes them.
	UnavailableSince time.Time
	// Reason is the broker's answer while the topic is unavailable.
	Reason string
	// Fix says what an operator does about it.
	Fix string
}

// Unavailable reports whether the topic cannot take records now.
func (s TopicStatus) Unavailable() bool { return !s.UnavailableSince.IsZero() }

// TopicReporter is implemented by sinks that know the state of the topics
// they publish to ([kafka.Sink]). The relay's status page, metrics and
// readiness check show it.
//
// [kafka.Sink]: github.com/outbox-dev/outbox/sink/kafka
type TopicReporter interface {
	// Topics returns the state of each topic, sorted by name.
	Topics() []TopicStatus
}

package kafka

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/outbox-dev/outbox/sink"
)

// Timing of the topic book.
const (
	// topicLogEvery is the shortest time between two log lines about one
	// unavailable topic.
	topicLogEvery = 30 * time.Second
	// topicForgetAfter is how long after its last failure a topic counts
	// as available again when no publish told: no message waits for it
	// any more (a waiting message is tried at least every
	// sink.MaxTopicRetryDelay).
	topicForgetAfter = 3 * sink.MaxTopicRetryDelay
	// topicIdleFor is how long a topic that takes records stays in the
	// book after its last record: the book, the metrics and the reports
	// keep the topics of the last hour, not every topic ever named.
	topicIdleFor = time.Hour
)

// topicBook keeps what the sink knows of each topic it published to or
// tried to: acknowledgement counts, and whether the topic can take records.
// It logs the first acknowledgement of each topic once, an unavailable
// topic at most every topicLogEvery, and the topic's return.
type topicBook struct {
	log *slog.Logger

	mu     sync.Mutex
	topics map[string]*topicEntry
}

// topicEntry is one topic's state in the book.
type topicEntry struct {
	status sink.TopicStatus
	// perMinute counts acknowledgements by minute (Unix minute modulo 60);
	// minuteOf says which minute each slot holds.
	perMinute [60]int64
	minuteOf  [60]int64
	// missing is set while the topic does not exist: Publish fails its
	// records at once until a probe finds it (see Sink.probeMissing).
	missing      bool
	lastFailedAt time.Time
	loggedAt     time.Time
	waited       int64 // failed records since the last log line
}

func newTopicBook(log *slog.Logger) *topicBook {
	return &topicBook{log: log, topics: make(map[string]*topicEntry)}
}

// entry returns topic's entry, creating it; b.mu is held.
func (b *topicBook) entry(topic string) *topicEntry {
	e, ok := b.topics[topic]
	if !ok {
		e = &topicEntry{status: sink.TopicStatus{Topic: topic}}
		b.topics[topic] = e
	}
	return e
}

// published counts n acknowledged records of topic at now.
func (b *topicBook) published(topic string, n int, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.entry(topic)
	if e.status.Published == 0 {
		e.status.FirstPublishedAt = now
		b.log.Info("first message published to topic", slog.String("topic", topic))
	}
	e.status.Published += int64(n)
	e.status.LastPublishedAt = now
	m := now.Unix() / 60
	if e.minuteOf[m%60] != m {
		e.minuteOf[m%60], e.perMinute[m%60] = m, 0
	}
	e.perMinute[m%60] += int64(n)
	b.available(e, now, "acknowledged")
}

// available marks e usable again and logs its return; b.mu is held.
func (b *topicBook) available(e *topicEntry, now time.Time, how string) {
	if !e.status.Unavailable() {
		return
	}
	b.log.Info("topic takes records again; its waiting messages go out", slog.String("topic", e.status.Topic),
		slog.String("seen", how), slog.Duration("unavailable_for", now.Sub(e.status.UnavailableSince).Round(time.Second)))
	e.status.UnavailableSince, e.status.Reason, e.status.Fix = time.Time{}, "", ""
	e.missing, e.waited, e.loggedAt = false, 0, time.Time{}
}

// failed records that a record of topic failed with te at now, and returns
// te with its Topic and Since filled in.
func (b *topicBook) failed(topic string, te *sink.TopicError, now time.Time) *sink.TopicError {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.entry(topic)
	b.expire(e, now)
	if !e.status.Unavailable() {
		e.status.UnavailableSince = now
	}
	e.status.Reason, e.status.Fix = reasonOf(te.Err), te.Fix
	e.missing = isMissing(te.Err)
	e.lastFailedAt = now
	e.waited++
	b.maybeLog(e, now)
	out := *te
	out.Topic, out.Since = topic, e.status.UnavailableSince
	return &out
}

// blocked returns the error of a record of topic if the topic is known to
// be missing (it fails at once, without waiting for the producer's
// metadata refreshes), or nil.
func (b *topicBook) blocked(topic string, now time.Time) *sink.TopicError {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.topics[topic]
	if !ok || !e.missing {
		return nil
	}
	e.lastFailedAt = now
	e.waited++
	b.maybeLog(e, now)
	return &sink.TopicError{Topic: topic, Err: kerr.UnknownTopicOrPartition, Fix: e.status.Fix, Since: e.status.UnavailableSince}
}

// maybeLog logs e's unavailability unless it did less than topicLogEvery
// ago; b.mu is held.
func (b *topicBook) maybeLog(e *topicEntry, now time.Time) {
	if !e.loggedAt.IsZero() && now.Sub(e.loggedAt) < topicLogEvery {
		return
	}
	b.log.Error("topic cannot take records; its messages wait, in order, without counting attempts",
		slog.String("topic", e.status.Topic), slog.String("reason", e.status.Reason), slog.String("fix", e.status.Fix),
		slog.Duration("unavailable_for", now.Sub(e.status.UnavailableSince).Round(time.Second)),
		slog.Int64("records_refused_since_last_line", e.waited))
	e.loggedAt, e.waited = now, 0
}

// expire marks e available when no record failed for it for
// topicForgetAfter; b.mu is held.
func (b *topicBook) expire(e *topicEntry, now time.Time) {
	if e.status.Unavailable() && now.Sub(e.lastFailedAt) > topicForgetAfter {
		b.available(e, now, "no message waits for it any more")
	}
}

// found marks the missing topics that a probe found as existing.
func (b *topicBook) found(topics []string, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, t := range topics {
		if e, ok := b.topics[t]; ok && e.missing {
			b.available(e, now, "it exists now")
		}
	}
}

// missingTopics returns the topics known to be missing.
func (b *topicBook) missingTopics() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for t, e := range b.topics {
		if e.missing {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

// statuses returns the status at now of every topic with a record in the
// last topicIdleFor, or that cannot take records, sorted by name; it
// forgets the others.
func (b *topicBook) statuses(now time.Time) []sink.TopicStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]sink.TopicStatus, 0, len(b.topics))
	for t, e := range b.topics {
		b.expire(e, now)
		if !e.status.Unavailable() && now.Sub(e.status.LastPublishedAt) > topicIdleFor && now.Sub(e.lastFailedAt) > topicIdleFor {
			delete(b.topics, t)
			continue
		}
		s := e.status
		minute := now.Unix() / 60
		for i, m := range e.minuteOf {
			if m > minute-60 {
				s.PublishedLastHour += e.perMinute[i]
			}
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b sink.TopicStatus) int { return strings.Compare(a.Topic, b.Topic) })
	return out
}

// isMissing reports whether err says the topic does not exist.
func isMissing(err error) bool {
	return errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.UnknownTopicID) || isMissingPartition(err)
}

// reasonOf is the short form of the broker's answer: the Kafka error
// code's name if there is one.
func reasonOf(err error) string {
	if ke, ok := errors.AsType[*kerr.Error](err); ok {
		return ke.Message
	}
	return err.Error()
}

package demo

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outbox-dev/outbox/consumer"
	"github.com/outbox-dev/outbox/inbox"
)

// consumerStats counts what a consumer runner did, from its hooks.
type consumerStats struct {
	processed, duplicates, parked, retried atomic.Int64
	// created counts first-time OrderPlaced events: invoices or
	// reservations made.
	created atomic.Int64
	// latency, when set, receives each created effect's latency.
	latency *latencies
}

func (s *consumerStats) hooks() consumer.Hooks {
	return consumer.Hooks{
		Handled: func(msg inbox.Message, res inbox.Result, _ time.Duration) {
			if res == inbox.Duplicate {
				s.duplicates.Add(1)
				return
			}
			s.processed.Add(1)
			if at, ok := placedAt(msg); ok {
				s.created.Add(1)
				if s.latency != nil {
					s.latency.add(time.Since(at))
				}
			}
		},
		Parked:  func(inbox.Message, error) { s.parked.Add(1) },
		Retried: func(inbox.Message, error) { s.retried.Add(1) },
	}
}

// latencies collects durations and gives percentiles.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// percentiles returns p50, p99 and max (zero when empty).
func (l *latencies) percentiles() (p50, p99, maxD time.Duration) {
	l.mu.Lock()
	d := slices.Clone(l.d)
	l.mu.Unlock()
	if len(d) == 0 {
		return 0, 0, 0
	}
	slices.Sort(d)
	at := func(p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	return at(0.50), at(0.99), d[len(d)-1]
}

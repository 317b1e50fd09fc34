package pgstoretest

import (
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/outbox-dev/outbox"
)

// RecordingSink is a relay's sink that acknowledges every record and
// remembers the seqs it published per aggregate, in order. Its methods are
// safe for concurrent use. The zero value is ready to use.
type RecordingSink struct {
	mu    sync.Mutex
	byAgg map[string][]int64
	n     int
}

// Publish records recs and acknowledges each of them.
func (s *RecordingSink) Publish(_ context.Context, recs []outbox.Record) []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byAgg == nil {
		s.byAgg = map[string][]int64{}
	}
	for _, r := range recs {
		s.byAgg[r.AggregateID] = append(s.byAgg[r.AggregateID], r.Seq)
		s.n++
	}
	return make([]error, len(recs))
}

// Close does nothing.
func (s *RecordingSink) Close() error { return nil }

// Count returns the number of records published.
func (s *RecordingSink) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// ByAggregate returns a copy of the seqs published per aggregate id, each
// in the order they were published.
func (s *RecordingSink) ByAggregate() map[string][]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := maps.Clone(s.byAgg)
	for agg, seqs := range out {
		out[agg] = slices.Clone(seqs)
	}
	return out
}

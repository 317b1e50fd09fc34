package kafka

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/sink"
)

// placed is an attempt's state in a placement the test builds: placed in a
// partition, failed (answered with an error), or withdrawn.
type placed struct {
	agg       string
	state     int32
	partition int32
}

// buildPlacement returns a call and a placement whose attempts are as
// given, in that order; records are numbered in that order too.
func buildPlacement(attempts []placed) (*runCall, *placement) {
	c := &runCall{changed: make(chan struct{}, 1)}
	pl := &placement{}
	aggs := make(map[string]*runAggregate)
	for i, p := range attempts {
		agg := aggs[p.agg]
		if agg == nil {
			agg = &runAggregate{partition: -1}
			aggs[p.agg] = agg
		}
		r := outbox.Record{Message: outbox.Message{ID: uuid.Must(uuid.NewV7()), AggregateID: p.agg}}
		c.recs = append(c.recs, r)
		c.topics = append(c.topics, "t")
		rr := &runRecord{i: i, agg: agg}
		c.queue = append(c.queue, rr)
		a := &attempt{c: c, pl: pl, rr: rr}
		a.state.Store(p.state)
		a.partition.Store(p.partition)
		if p.state == attemptAnswered {
			a.err = errors.New("refused")
		}
		rr.att = a
		pl.attempts = append(pl.attempts, a)
	}
	return c, pl
}

// The check before a flush finds each record that could reach the topic
// without an earlier record of its aggregate: one placed after a record of
// its aggregate failed (the failure came before it joined the buffer, or it
// would have failed too), and one placed in another partition than the
// aggregate's earlier records. Withdrawing the placement produces again the
// records before those, and not the records from there on.
func TestConflicts_FollowerOfFailureOrOtherPartition(t *testing.T) {
	c, pl := buildPlacement([]placed{
		{"a", attemptPlaced, 0},    // 0
		{"b", attemptPlaced, 1},    // 1
		{"a", attemptAnswered, 0},  // 2: failed while placed
		{"a", attemptPlaced, 0},    // 3: placed after 2 failed
		{"b", attemptPlaced, 1},    // 4
		{"b", attemptPlaced, 2},    // 5: partitions changed
		{"b", attemptPlaced, 2},    // 6
		{"c", attemptAnswered, -1}, // 7: failed before it was placed
		{"c", attemptPlaced, 0},    // 8
		{"d", attemptPlaced, 1},    // 9: unaffected
	})
	conflicts := c.conflicts(pl)
	var got []int
	for a := range conflicts {
		got = append(got, a.rr.i)
	}
	slices.Sort(got)
	if want := []int{3, 5, 6, 8}; !slices.Equal(got, want) {
		t.Fatalf("conflicts at records %v, want %v", got, want)
	}

	// Withdrawn: every record still placed failed unsent.
	for _, a := range pl.attempts {
		a.state.CompareAndSwap(attemptPlaced, attemptWithdrawn)
	}
	var redo []int
	for _, rr := range c.withdraw(pl, conflicts) {
		redo = append(redo, rr.i)
	}
	if want := []int{0, 1, 4, 9}; !slices.Equal(redo, want) {
		t.Errorf("produced again: records %v, want %v", redo, want)
	}
	for _, i := range []int{3, 5, 6, 8} {
		if rr := c.queue[i]; !rr.gated || !errors.Is(rr.err, sink.ErrNotSent) {
			t.Errorf("record %d: gated %v, err %v; want not sent", i, rr.gated, rr.err)
		}
	}
}

// A placement in which every record is in the partition of its aggregate
// and none follows a failure is flushed as it is.
func TestConflicts_NoneWhenInOrder(t *testing.T) {
	c, pl := buildPlacement([]placed{
		{"a", attemptPlaced, 0},
		{"b", attemptPlaced, 1},
		{"a", attemptPlaced, 0},
		{"b", attemptAnswered, 1}, // the last of b failed: nothing after it
	})
	if conflicts := c.conflicts(pl); len(conflicts) != 0 {
		t.Errorf("conflicts %v, want none", conflicts)
	}
}

// A call is flushed in parts that fit the client's buffer; a record larger
// than MaxBufferedBytes, which the client refuses, does not end a part.
func TestChunk_FitsTheBuffer(t *testing.T) {
	for _, tc := range []struct {
		records, bytes int64
		sizes          []int64
		want           int
	}{
		{records: 3, sizes: []int64{10, 10, 10, 10}, want: 3},
		{records: 10, bytes: 25, sizes: []int64{10, 10, 10}, want: 2},
		{records: 10, bytes: 25, sizes: []int64{10, 100, 10, 10}, want: 3},
		{records: 10, bytes: 25, sizes: []int64{30, 10, 20}, want: 2},
		{records: 10, sizes: []int64{1000, 1000}, want: 2},
	} {
		c := &runCall{s: &Sink{maxBufferedRecords: tc.records, maxBufferedBytes: tc.bytes}}
		var queue []*runRecord
		for _, n := range tc.sizes {
			queue = append(queue, &runRecord{size: n})
		}
		if chunk, rest := c.chunk(queue); len(chunk) != tc.want || len(chunk)+len(rest) != len(queue) {
			t.Errorf("%s: chunk of %d, rest %d; want a chunk of %d", fmt.Sprint(tc), len(chunk), len(rest), tc.want)
		}
	}
}

package cursor_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgstoretest"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/relay/cursor"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// topic is a broker's topic shared by the relays of a test: every record
// a sink acknowledged, in the order acknowledged, and the sinks' calls.
type topic struct {
	mu    sync.Mutex
	seqs  map[string][]int64 // per aggregate id, every delivery
	calls [][]outbox.Record  // the records of every PublishRuns call
	plain int                // Publish calls
}

func newTopic() *topic { return &topic{seqs: map[string][]int64{}} }

func (tp *topic) append(recs []outbox.Record, runs bool) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	for _, r := range recs {
		tp.seqs[r.AggregateID] = append(tp.seqs[r.AggregateID], r.Seq)
	}
	if runs {
		tp.calls = append(tp.calls, slices.Clone(recs))
	} else {
		tp.plain++
	}
}

// deliveries returns every delivery of aggregate id's messages, in order.
func (tp *topic) deliveries(id string) []int64 {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return slices.Clone(tp.seqs[id])
}

// runCalls returns the records of every PublishRuns call.
func (tp *topic) runCalls() [][]outbox.Record {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return slices.Clone(tp.calls)
}

// runSink is a sink.RunSink that acknowledges every record onto a topic.
// With hangAt above 0, its hangAt-th call acknowledges its records and
// then does not return until hang is closed: a relay that stops after the
// broker's acknowledgement, before it marks anything.
type runSink struct {
	tp     *topic
	hangAt int
	hung   chan []int64 // the seqs of the call that hangs
	hang   chan struct{}

	mu    sync.Mutex
	calls int
}

var _ sink.RunSink = (*runSink)(nil)

func (s *runSink) Publish(_ context.Context, recs []outbox.Record) []error {
	return s.publish(recs, false)
}

func (s *runSink) PublishRuns(_ context.Context, recs []outbox.Record) []error {
	return s.publish(recs, true)
}

func (s *runSink) publish(recs []outbox.Record, runs bool) []error {
	s.tp.append(recs, runs)
	s.mu.Lock()
	s.calls++
	hangs := s.hangAt > 0 && s.calls >= s.hangAt
	first := s.calls == s.hangAt
	s.mu.Unlock()
	if hangs {
		if first {
			s.hung <- pgstoretest.Seqs(recs)
		}
		<-s.hang
	}
	return make([]error, len(recs))
}

func (s *runSink) Close() error { return nil }

// startRelay starts a relay of strategy st with runs of up to maxRun
// messages, publishing with snk; it is stopped when the test ends (after
// cleanups registered later).
func startRelay(t *testing.T, st *cursor.Strategy, snk sink.Sink, id string, maxRun, workers int) {
	t.Helper()
	rl, err := relay.New(relay.Config{Strategy: st, Sink: snk, ID: id, BatchSize: 40, MaxRun: maxRun,
		Workers: workers, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := rl.Start(pgstoretest.Context(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rl.Stop(context.Background()) })
}

// enqueueHot commits n messages of aggregate id, a few per transaction,
// and returns their seqs.
func enqueueHot(t *testing.T, b *pgstoretest.Bundle, id string, n int) []int64 {
	t.Helper()
	var seqs []int64
	for len(seqs) < n {
		var msgs []outbox.Message
		for range min(7, n-len(seqs)) {
			msgs = append(msgs, pgstoretest.Msg("Order", id))
		}
		seqs = append(seqs, b.Enqueue(t, msgs...)...)
	}
	return seqs
}

// waitDelivered waits until every seq of want was delivered on tp for
// aggregate id.
func waitDelivered(t *testing.T, tp *topic, id string, want []int64) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got := tp.deliveries(id)
		missing := slices.DeleteFunc(slices.Clone(want), func(s int64) bool { return slices.Contains(got, s) })
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages of %s never delivered, the first %d", len(missing), len(want), id, missing[0])
		}
	}
}

// firstDeliveries returns the seqs of got in the order of their first
// delivery.
func firstDeliveries(got []int64) []int64 {
	var out []int64
	for _, s := range got {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// A relay with runs drains a backlog of one aggregate in batches that
// carry runs of up to MaxRun of its messages, each published in order,
// once.
func TestCursor_ARelayWithRunsDrainsOneAggregateInOrder(t *testing.T) {
	const maxRun = 8
	b := pgstoretest.SetupCursor(t, pgstore.Config{})
	want := enqueueHot(t, b, "hot", 120)
	tp := newTopic()
	startRelay(t, cursor.New(b.Store), &runSink{tp: tp}, "A", maxRun, 4)
	waitDelivered(t, tp, "hot", want)

	if got := tp.deliveries("hot"); !slices.Equal(got, want) {
		t.Errorf("delivered %v\nwant %v, each once, in seq order", got, want)
	}
	longest := 0
	for _, recs := range tp.runCalls() {
		longest = max(longest, len(recs))
		if len(recs) > maxRun {
			t.Errorf("a batch carried %d messages of the aggregate: %v; MaxRun is %d", len(recs), pgstoretest.Seqs(recs), maxRun)
		}
	}
	if longest < 2 {
		t.Errorf("no batch carried a run (the longest had %d messages of the aggregate)", longest)
	}
	t.Logf("%d runs, the longest of %d", len(tp.runCalls()), longest)
}

// A leader with runs that stops after the broker acknowledged a run and
// before it marked it: the next leader publishes that run again, and
// nothing it saved as handled; the first delivery of every message of the
// aggregate is in seq order.
func TestCursor_ANewLeaderRepublishesTheRunTheOldOneDidNotMarkInOrder(t *testing.T) {
	const maxRun = 5
	// Every mark saves: what the leader marked before it stopped is saved.
	b := pgstoretest.SetupCursor(t, pgstore.Config{CursorSaveInterval: -1})
	want := enqueueHot(t, b, "hot", 60)
	tp := newTopic()
	old := &runSink{tp: tp, hangAt: 3, hung: make(chan []int64, 1), hang: make(chan struct{})}
	oldStrategy := cursor.New(b.Store)
	startRelay(t, oldStrategy, old, "A", maxRun, 1)
	t.Cleanup(func() { close(old.hang) }) // runs before the relay's Stop
	var hungRun []int64
	select {
	case hungRun = <-old.hung:
	case <-time.After(30 * time.Second):
		t.Fatal("the leader's relay never published its third batch")
	}
	oldStrategy.Hang() // it renews nothing: its lease runs out
	if len(hungRun) < 2 {
		t.Fatalf("the batch the leader stopped after carried %v, not a run", hungRun)
	}

	newStrategy := b.NewCursor(t, pgstore.Config{}).Strategy
	startRelay(t, newStrategy, &runSink{tp: tp}, "B", maxRun, 2)
	waitDelivered(t, tp, "hot", want)

	got := tp.deliveries("hot")
	if first := firstDeliveries(got); !slices.Equal(first, want) {
		t.Errorf("first deliveries %v\nwant %v", first, want)
	}
	for _, s := range want {
		wantN := 1
		if slices.Contains(hungRun, s) {
			wantN = 2 // by the old leader, which did not mark it, and the new one
		}
		if n := count(got, s); n != wantN {
			t.Errorf("message %d delivered %d times, want %d (the unmarked run is %v)", s, n, wantN, hungRun)
		}
	}
	t.Logf("deliveries: %v", got)
}

func count(xs []int64, x int64) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}

package cdc_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/relay/cdc"
	"github.com/outbox-dev/outbox/sink"
)

// testRunSink is a sink.RunSink over a sink whose Publish keeps the order
// of an aggregate's records in a call (a Kafka sink): PublishRuns is its
// Publish.
type testRunSink struct{ sink.Sink }

// plainSink hides every method of its sink but those of sink.Sink, so that
// it is not a sink.RunSink whatever it wraps.
type plainSink struct{ sink.Sink }

func (s testRunSink) PublishRuns(ctx context.Context, recs []outbox.Record) []error {
	return s.Publish(ctx, recs)
}

// gatedRunSink is a testRunSink whose publishes wait until open is closed.
// It logs the records of each PublishRuns call and, once the broker
// acknowledged them, calls onRun with them, until onRun returns true.
type gatedRunSink struct {
	testRunSink
	open  chan struct{}
	mu    sync.Mutex
	runs  [][]outbox.Record
	onRun func(recs []outbox.Record) bool
}

func (s *gatedRunSink) Publish(ctx context.Context, recs []outbox.Record) []error {
	<-s.open
	return s.testRunSink.Publish(ctx, recs)
}

func (s *gatedRunSink) PublishRuns(ctx context.Context, recs []outbox.Record) []error {
	<-s.open
	errs := s.testRunSink.Publish(ctx, recs)
	s.mu.Lock()
	s.runs = append(s.runs, recs)
	if s.onRun != nil && s.onRun(recs) {
		s.onRun = nil
	}
	s.mu.Unlock()
	return errs
}

func (s *gatedRunSink) calls() [][]outbox.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs
}

// runOf returns, per aggregate, the event numbers (seqPayload.N) of recs in
// the order of recs. It may run on any goroutine.
func runOf(t *testing.T, recs []outbox.Record) map[string][]int {
	t.Helper()
	ns := map[string][]int{}
	for _, rec := range recs {
		var p seqPayload
		if err := json.Unmarshal(rec.Payload, &p); err != nil {
			t.Errorf("bad payload %q: %v", rec.Payload, err)
			continue
		}
		ns[p.Aggregate] = append(ns[p.Aggregate], p.N)
	}
	return ns
}

// enqueueBacklog commits n messages of agg, perTx per transaction.
func (e *env) enqueueBacklog(agg string, n, perTx int) {
	e.t.Helper()
	for i := 0; i < n; i += perTx {
		var msgs []outbox.Message
		for k := i; k < min(i+perTx, n); k++ {
			msgs = append(msgs, seqMessage(agg, k))
		}
		e.enqueue(msgs...)
	}
}

// With Config.MaxRun, a backlog on one aggregate is published in runs:
// PublishRuns calls that carry several consecutive messages of the
// aggregate, at most MaxRun of them, in order; every message arrives, in
// order, and is recorded SENT.
func TestRuns_BacklogOnOneAggregate_PublishedInRunsInOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t, broker.Config{})
	snk := &gatedRunSink{testRunSink: testRunSink{e.newSink(nil)}, open: make(chan struct{})}
	cfg := e.config(snk)
	cfg.BatchSize = 50
	cfg.MaxRun = 10
	r := e.start(cfg)
	e.waitLeader(r, 20*time.Second)
	const hot, cold = 150, 5
	e.enqueueBacklog("hot", hot, 10)
	e.enqueueBacklog("cold", cold, 1)
	close(snk.open)

	checkOrder(t, e.consumed(hot+cold, 60*time.Second), map[string]int{"hot": hot, "cold": cold})
	e.waitCount(outbox.StatusSent, hot+cold, 20*time.Second)
	longest := 0
	for _, recs := range snk.calls() {
		for agg, ns := range runOf(t, recs) {
			if len(ns) > cfg.MaxRun {
				t.Fatalf("a call carried %d messages of %s: %v; want at most MaxRun (%d)", len(ns), agg, ns, cfg.MaxRun)
			}
			for i := 1; i < len(ns); i++ {
				if ns[i] != ns[i-1]+1 {
					t.Fatalf("a call carried %v of %s; want consecutive messages in order", ns, agg)
				}
			}
			longest = max(longest, len(ns))
		}
	}
	if longest < 2 {
		t.Fatalf("%d PublishRuns calls, the longest run %d; want runs of the backlog", len(snk.calls()), longest)
	}
}

// The streaming relay stops like a crash (Abort) after the broker
// acknowledged a run and before its record committed: its rows stay
// PENDING, and the next session publishes the run again; the first
// deliveries of every aggregate are in order and nothing is lost.
func TestRuns_AbortAfterTheAckBeforeTheRecord_NextSessionRepublishes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, broker.Config{})
	snk := &gatedRunSink{testRunSink: testRunSink{e.newSink(nil)}, open: make(chan struct{})}
	cfg := e.config(snk)
	cfg.BatchSize = 50
	cfg.MaxRun = 10
	first := e.newRelay(cfg)
	e.waitLeader(first, 20*time.Second)
	acked := make(chan []outbox.Record, 1)
	snk.onRun = func(recs []outbox.Record) bool {
		if len(runOf(t, recs)["hot"]) < 2 {
			return false
		}
		cdc.Abort(first)
		acked <- recs
		return true
	}
	const hot, cold = 100, 5
	e.enqueueBacklog("hot", hot, 10)
	e.enqueueBacklog("cold", cold, 1)
	close(snk.open)
	var run []outbox.Record
	select {
	case run = <-acked:
	case <-time.After(30 * time.Second):
		t.Fatal("no run published within 30s")
	}
	waitStopped(t, first, 20*time.Second)
	for _, n := range runOf(t, run)["hot"] {
		if st := e.status("hot", n).Status; st != outbox.StatusPending {
			t.Fatalf("hot#%d is %s after the abort; want PENDING (its record did not commit)", n, st)
		}
	}

	e.newRelay(cfg)
	recs := e.consumed(hot+cold, 60*time.Second)
	checkOrder(t, recs, map[string]int{"hot": hot, "cold": cold})
	delivered := map[string]int{}
	for _, r := range recs {
		delivered[header(r, "eventId")]++
	}
	for _, rec := range run {
		if delivered[rec.ID.String()] < 2 {
			t.Fatalf("message %s of the aborted run delivered %d times; want again by the next session",
				rec.ID, delivered[rec.ID.String()])
		}
	}
	e.waitCount(outbox.StatusSent, hot+cold, 20*time.Second)
}

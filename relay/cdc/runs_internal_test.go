package cdc

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
)

// runSinkFunc is a sink.RunSink whose Publish and PublishRuns call f with
// their name.
type runSinkFunc func(ctx context.Context, method string, recs []outbox.Record) []error

func (f runSinkFunc) Publish(ctx context.Context, recs []outbox.Record) []error {
	return f(ctx, "Publish", recs)
}

func (f runSinkFunc) PublishRuns(ctx context.Context, recs []outbox.Record) []error {
	return f(ctx, "PublishRuns", recs)
}

func (runSinkFunc) Close() error { return nil }

// addAll adds a message of each of aggs, seq 1, 2, ... in stream order, to
// publish, to ss's ledger in one batch.
func (ss *session) addAll(aggs ...string) {
	var items []item
	for i, agg := range aggs {
		items = append(items, item{rec: testRec(int64(i+1), agg), act: actPublish})
	}
	ss.s.mu.Lock()
	ss.a.l.add(1, items, 0)
	ss.s.mu.Unlock()
	ss.s.wakes.signal()
}

// With Config.MaxRun, the stream's core publishes the ready messages of
// an aggregate as a run, in one PublishRuns call, and Hooks.Published is
// called once per message of the run, once its record committed.
func TestSession_RunPublishedInOneCallPublishedHookOncePerMessage(t *testing.T) {
	var mu sync.Mutex
	var calls [][]int64
	snk := runSinkFunc(func(_ context.Context, method string, recs []outbox.Record) []error {
		if method == "PublishRuns" {
			mu.Lock()
			calls = append(calls, seqs(recs))
			mu.Unlock()
		}
		return make([]error, len(recs))
	})
	published := make(chan int64, 10)
	var records atomic.Int64
	ss := testSessionWith(t, Config{Sink: snk, MaxRun: 4,
		Hooks: Hooks{Published: func(rec outbox.Record, _ time.Duration) { published <- rec.Seq }}},
		func(toRecord) error { records.Add(1); return nil })
	ss.addAll("a", "a", "a", "a", "b")
	if err := ss.r.core.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got []int64
	for len(got) < 5 {
		select {
		case seq := <-published:
			got = append(got, seq)
		case <-time.After(10 * time.Second):
			t.Fatalf("Hooks.Published for %v; want 1 to 5", got)
		}
	}
	ss.a.rec.waitIdle()
	if err := ss.r.core.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	close(published)
	for seq := range published {
		got = append(got, seq)
	}
	slices.Sort(got)
	wantSeqs(t, "Hooks.Published", got, []int64{1, 2, 3, 4, 5})
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 1 || !slices.Equal(calls[0], []int64{1, 2, 3, 4, 5}) {
		t.Fatalf("PublishRuns calls %v; want one, [1 2 3 4 5]: the run of a and the head of b", calls)
	}
}

// A session that ends while a run is being published abandons the
// publish: the whole run comes back to the ledger, nothing is recorded,
// and the run waits at the front of its aggregate, in order.
func TestSession_EndGivesTheWholeRunBack(t *testing.T) {
	entered := make(chan []int64, 1)
	snk := runSinkFunc(func(ctx context.Context, _ string, recs []outbox.Record) []error {
		entered <- seqs(recs)
		<-ctx.Done()
		errs := make([]error, len(recs))
		for i := range errs {
			errs[i] = ctx.Err()
		}
		return errs
	})
	var records atomic.Int64
	ss := testSessionWith(t, Config{Sink: snk, MaxRun: 4, PublishTimeout: 10 * time.Second},
		func(toRecord) error { records.Add(1); return nil })
	ss.addAll("a", "a", "a", "a")
	if err := ss.r.core.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ss.r.core.Stop(context.Background()) }()
	wantSeqs(t, "published", <-entered, []int64{1, 2, 3, 4})
	ss.end()
	ss.s.mu.Lock()
	defer ss.s.mu.Unlock()
	if ss.s.cur != nil || ss.a.l.leased() != 0 || ss.a.l.held() != 4 || records.Load() != 0 {
		t.Fatalf("after the end: attached %t, leased %d, held %d, records %d; want detached, 0, 4, 0",
			ss.s.cur != nil, ss.a.l.leased(), ss.a.l.held(), records.Load())
	}
	wantSeqs(t, "the run back in order", seqs(ss.a.l.claim(uuid.New(), 10, runLimits{max: 4})), []int64{1, 2, 3, 4})
}

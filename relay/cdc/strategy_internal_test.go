package cdc

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/store"
)

// testAttachment attaches a ledger to s with a recorder whose statements
// only collect what they record (recorded) and then pass it in the
// ledger, as a session does.
type testAttachment struct {
	*attachment
	mu       sync.Mutex
	recorded []toRecord
}

func attachTest(s *streamStrategy) *testAttachment {
	ta := &testAttachment{attachment: &attachment{l: newLedger(), returned: make(chan struct{}, 1)}}
	ta.ctx, ta.cancel = context.WithCancel(context.Background())
	ta.rec = newRecorder(func(out toRecord) error {
		ta.mu.Lock()
		ta.recorded = append(ta.recorded, out)
		ta.mu.Unlock()
		return nil
	}, func(out toRecord) {
		s.mu.Lock()
		ta.l.recorded(out, 0)
		s.mu.Unlock()
	})
	s.attach(ta.attachment)
	return ta
}

// add adds messages of the aggregates named by aggs, seq 1, 2, ... in
// stream order, to publish.
func (ta *testAttachment) add(s *streamStrategy, aggs ...string) {
	var items []item
	for i, agg := range aggs {
		items = append(items, item{rec: outbox.Record{Seq: int64(i + 1), Message: outbox.Message{
			ID: uuid.New(), AggregateType: "Order", AggregateID: agg, Topic: "t"}}, act: actPublish})
	}
	s.mu.Lock()
	ta.l.add(1, items, 0)
	s.mu.Unlock()
	s.wakes.signal()
}

// brokerDown is a sink whose first publish finds the broker unreachable,
// and which acknowledges everything after that; it logs each publish.
type brokerDown struct {
	mu        sync.Mutex
	calls     [][]int64
	failedAt  time.Time // when the failing publish returned
	nextAt    time.Time // when the next publish began
	published chan struct{}
}

func (b *brokerDown) Publish(_ context.Context, recs []outbox.Record) []error {
	b.mu.Lock()
	defer b.mu.Unlock()
	errs := make([]error, len(recs))
	first := len(b.calls) == 0
	if len(b.calls) == 1 {
		b.nextAt = time.Now()
	}
	var seqs []int64
	for i, rec := range recs {
		seqs = append(seqs, rec.Seq)
		if first {
			errs[i] = fmt.Errorf("%w: connection refused (test)", sink.ErrUnavailable)
		}
	}
	b.calls = append(b.calls, seqs)
	if first {
		b.failedAt = time.Now()
	}
	select {
	case b.published <- struct{}{}:
	default:
	}
	return errs
}

func (b *brokerDown) Close() error { return nil }

// The broker is unreachable for the first publish: the relay core pauses,
// the strategy gives the messages back (nothing is recorded for them,
// nothing counts), and after the pause they are published again, the
// later messages of their aggregates after them: every message is
// acknowledged and recorded SENT once, in order per aggregate.
func TestStrategy_UnavailableGoesBackAndIsPublishedAfterThePause(t *testing.T) {
	s := newStreamStrategy(slog.New(slog.DiscardHandler))
	ta := attachTest(s)
	const pause = 100 * time.Millisecond
	snk := &brokerDown{published: make(chan struct{}, 1)}
	core, err := relay.New(relay.Config{Strategy: s, Sink: streamSink{Sink: snk, s: s}, BatchSize: 10, Workers: 2,
		PollInterval: streamPollInterval, IdleAfter: -1, Linger: -1, UnavailableBackoffMax: pause,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ta.add(s, "a", "b", "a", "a", "b")
	if err := core.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = core.Stop(context.Background()) }()

	var sent []int64
	deadline := time.After(20 * time.Second)
	for len(sent) < 5 {
		select {
		case <-deadline:
			t.Fatalf("sent %v, records %v; want all five recorded SENT", sent, ta.recordedSeqs())
		case <-time.After(10 * time.Millisecond):
		}
		sent = ta.recordedSeqs()
	}
	snk.mu.Lock()
	calls, failedAt, nextAt := slices.Clone(snk.calls), snk.failedAt, snk.nextAt
	snk.mu.Unlock()
	if !slices.Equal(calls[0], []int64{1, 2}) {
		t.Fatalf("first publish %v; want the heads of both aggregates, [1 2]", calls[0])
	}
	if gap := nextAt.Sub(failedAt); gap < pause {
		t.Fatalf("published again %v after the broker was found unreachable; want the pause (%v) first", gap, pause)
	}
	if !slices.Equal(calls[1], []int64{1, 2}) {
		t.Fatalf("publish after the pause %v; want [1 2] again, first in line", calls[1])
	}
	// Order per aggregate in the broker: each message after the previous
	// one of its aggregate was acknowledged (a later call).
	at := map[int64]int{}
	for i, c := range calls[1:] {
		for _, seq := range c {
			at[seq] = i
		}
	}
	if !(at[1] < at[3] && at[3] < at[4] && at[2] < at[5]) {
		t.Fatalf("publishes %v; want 1, 3, 4 (aggregate a) and 2, 5 (aggregate b) in order, one per call each", calls)
	}
	slices.Sort(sent)
	if !slices.Equal(sent, []int64{1, 2, 3, 4, 5}) {
		t.Fatalf("recorded %v; want each message SENT once, no failure recorded", ta.recordedAll())
	}
	s.mu.Lock()
	held := ta.l.held()
	s.mu.Unlock()
	if held != 0 {
		t.Fatalf("ledger holds %d messages after everything was recorded; want 0", held)
	}
}

// recordedSeqs returns the seqs recorded SENT so far.
func (ta *testAttachment) recordedSeqs() []int64 {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	var seqs []int64
	for _, out := range ta.recorded {
		for _, e := range out.sent {
			seqs = append(seqs, e.rec.Seq)
		}
	}
	return seqs
}

// recordedAll returns every seq recorded, sent or not.
func (ta *testAttachment) recordedAll() [][]int64 {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	var all [][]int64
	for _, out := range ta.recorded {
		all = append(all, seqsOfRecord(out))
	}
	return all
}

// Once the session's ledger is detached, the marks of its claims change
// nothing and return 0 (the core reports them fenced), claims hand out
// nothing, and nothing is recorded.
func TestStrategy_MarksOfADetachedLedgerReturnZero(t *testing.T) {
	ctx := context.Background()
	s := newStreamStrategy(slog.New(slog.DiscardHandler))
	ta := attachTest(s)
	ta.add(s, "a", "b", "c")
	c, err := s.Claim(ctx, store.ClaimParams{Limit: 10})
	if err != nil || len(c.Records) != 3 {
		t.Fatalf("claim: %d records, %v; want 3", len(c.Records), err)
	}
	s.detach(ta.attachment)

	if n, next, err := s.MarkSent(ctx, c.Token, []int64{1}, nil); n != 0 || next != nil || err != nil {
		t.Errorf("MarkSent after detach: %d, %v, %v; want 0", n, next, err)
	}
	if n, err := s.MarkFailed(ctx, c.Token, []store.Failure{{Seq: 2, Error: "boom", CountAttempt: true}}); n != 0 || err != nil {
		t.Errorf("MarkFailed after detach: %d, %v; want 0", n, err)
	}
	if n, err := s.Release(ctx, c.Token, []int64{3}); n != 0 || err != nil {
		t.Errorf("Release after detach: %d, %v; want 0", n, err)
	}
	if c2, err := s.Claim(ctx, store.ClaimParams{Limit: 10}); err != nil || len(c2.Records) != 0 || c2.Token == uuid.Nil {
		t.Errorf("claim after detach: %d records, token %v, %v; want none under a fresh token", len(c2.Records), c2.Token, err)
	}
	if all := ta.recordedAll(); len(all) != 0 {
		t.Errorf("recorded %v after detach; want nothing", all)
	}
}

// blockWarn blocks the first WARN line until release is closed, after
// closing entered.
type blockWarn struct {
	slog.Handler
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (h *blockWarn) Enabled(context.Context, slog.Level) bool { return true }
func (h *blockWarn) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn {
		h.once.Do(func() { close(h.entered); <-h.release })
	}
	return nil
}

// A failure reaches the recorder before any later change of the ledger:
// a deferral that the failure causes (a later message of the failed
// aggregate, added while MarkFailed has not returned) is recorded in the
// same statement or after it, never before, so that the table path never
// takes the aggregate over while its earlier failure is unrecorded (it
// would send the next message without counting that attempt).
func TestStrategy_FailureIsRecordedBeforeTheDeferralItCauses(t *testing.T) {
	h := &blockWarn{entered: make(chan struct{}), release: make(chan struct{})}
	s := newStreamStrategy(slog.New(h))
	a := &attachment{l: newLedger(), returned: make(chan struct{}, 1)}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	var mu sync.Mutex
	var order [][]int64
	gate := make(chan struct{}) // holds a1's record until a3 was handed in
	a.rec = newRecorder(func(out toRecord) error {
		mu.Lock()
		order = append(order, seqsOfRecord(out))
		mu.Unlock()
		if slices.Contains(seqsOfRecord(out), 1) {
			<-gate
		}
		return nil
	}, func(out toRecord) {
		s.mu.Lock()
		a.l.recorded(out, 0)
		s.mu.Unlock()
	})
	s.attach(a)
	s.mu.Lock()
	a.l.add(1, []item{{rec: testRec(1, "a")}, {rec: testRec(2, "b")}}, 0)
	s.mu.Unlock()
	c, _ := s.Claim(context.Background(), store.ClaimParams{Limit: 10})
	done := make(chan struct{})
	go func() {
		defer close(done)
		// a1 failed for good; b2 found the broker unreachable, so
		// MarkFailed logs a warning (held by h) before it returns.
		_, _ = s.MarkFailed(context.Background(), c.Token, []store.Failure{
			{Seq: 1, Error: "bad", Dead: true, CountAttempt: true},
			{Seq: 2, Error: "down", Unavailable: true}})
	}()
	<-h.entered // MarkFailed changed the ledger and has not returned
	// The feeder adds a3: its aggregate is blocked, so it is deferred.
	s.mu.Lock()
	out := a.l.add(2, []item{{rec: testRec(3, "a")}}, 0)
	if !out.handsOver() {
		t.Fatal("a3 was not deferred")
	}
	a.rec.hand(out)
	s.mu.Unlock()
	close(gate)
	close(h.release)
	<-done
	a.rec.waitIdle()
	mu.Lock()
	defer mu.Unlock()
	var at1, at3 = -1, -1
	for i, seqs := range order {
		if slices.Contains(seqs, 1) {
			at1 = i
		}
		if slices.Contains(seqs, 3) {
			at3 = i
		}
	}
	if at1 < 0 || at3 < at1 {
		t.Fatalf("statements in start order %v; want a1's failure recorded with or before the deferral of a3", order)
	}
}

package cdc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/relay/strategy"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/store"
)

// ackAll acknowledges every publish.
type ackAll struct{}

func (ackAll) Publish(_ context.Context, recs []outbox.Record) []error {
	return make([]error, len(recs))
}
func (ackAll) Close() error { return nil }

// testSession is a session of a Relay that has the stream's core as New
// builds it (newCore), over snk, with hooks, and whose records run run.
func testSession(t *testing.T, snk sink.Sink, hooks Hooks, run func(toRecord) error) *session {
	t.Helper()
	return testSessionWith(t, Config{Sink: snk, Hooks: hooks}, run)
}

// testSessionWith is testSession for cfg (Sink and Hooks, and fields such
// as MaxRun), with a discarding logger and short timeouts.
func testSessionWith(t *testing.T, cfg Config, run func(toRecord) error) *session {
	t.Helper()
	cfg.Logger, cfg.Lease = slog.New(slog.DiscardHandler), time.Second
	if cfg.PublishTimeout == 0 {
		cfg.PublishTimeout = 200 * time.Millisecond
	}
	cfg = cfg.WithDefaults()
	r := &Relay{cfg: cfg, log: cfg.Logger}
	r.sendCtx, r.sendStop = context.WithCancel(context.Background())
	t.Cleanup(r.sendStop)
	if err := r.newCore(); err != nil {
		t.Fatal(err)
	}
	ss := &session{r: r, s: r.strat, confirmed: new(atomic.Uint64), budget: newBudget(1 << 20), room: make(chan struct{}, 1)}
	ss.a = &attachment{l: newLedger(), returned: make(chan struct{}, 1)}
	ss.a.ctx, ss.a.cancel = context.WithCancel(r.sendCtx)
	ss.a.rec = newRecorder(run, ss.complete)
	r.strat.attach(ss.a)
	return ss
}

// addOne adds a message of aggregate agg, to publish, to ss's ledger.
func (ss *session) addOne(seq int64, agg string) {
	ss.s.mu.Lock()
	ss.a.l.add(1, []item{{rec: testRec(seq, agg), act: actPublish}}, 0)
	ss.s.mu.Unlock()
	ss.s.wakes.signal()
}

// Hooks.Published is called once for an acknowledged message, and only
// once its record committed: a record that fails, or that the fence
// refuses, calls it for nothing (the stream's core, which marks without
// waiting for the record, does not call it at all).
func TestSession_PublishedOnlyOnceTheRecordCommitted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		wantPb int64
	}{
		{"committed", nil, 1},
		{"failed", errors.New("connection reset (test)"), 0},
		{"refused", fmt.Errorf("%w: refused (test)", errLostLead), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var published atomic.Int64
			recorded := make(chan struct{})
			ss := testSession(t, ackAll{}, Hooks{Published: func(outbox.Record, time.Duration) { published.Add(1) }},
				func(toRecord) error {
					defer close(recorded)
					return tc.err
				})
			ss.addOne(1, "a")
			if err := ss.r.core.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			<-recorded
			ss.a.rec.waitIdle()
			// Stop returns once the core's workers returned: any call the
			// core would make for its marks has been made.
			if err := ss.r.core.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := published.Load(); got != tc.wantPb {
				t.Fatalf("Hooks.Published called %d times; want %d", got, tc.wantPb)
			}
		})
	}
}

// waitIdle waits until nothing waits or runs, or the recorder failed.
func (rc *recorder) waitIdle() {
	for !rc.idle() {
		select {
		case <-rc.progress:
		case <-rc.failed:
			return
		}
	}
}

// warnings counts the WARN lines and signals each on warned.
type warnings struct {
	slog.Handler
	warned chan string
}

func (h warnings) Enabled(context.Context, slog.Level) bool { return true }
func (h warnings) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn {
		h.warned <- r.Message
	}
	return nil
}

// A session's end does not detach its ledger while a claim is out, even
// past the core's lease (it warns then): the claim's marks still reach
// the session's ledger, and only then does the session end.
func TestSession_EndWaitsForTheClaimsPastTheLease(t *testing.T) {
	s := newStreamStrategy(slog.New(slog.DiscardHandler))
	ta := attachTest(s)
	ta.add(s, "a")
	c, _ := s.Claim(context.Background(), store.ClaimParams{Limit: 10})
	if len(c.Records) != 1 {
		t.Fatalf("claimed %d; want 1", len(c.Records))
	}
	h := warnings{warned: make(chan string, 1)}
	r := &Relay{cfg: Config{Lease: 10 * time.Millisecond}, log: slog.New(h)}
	r.sendCtx, r.sendStop = context.WithCancel(context.Background())
	defer r.sendStop()
	ss := &session{r: r, s: s, a: ta.attachment}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		ss.end()
	}()
	<-h.warned // past the lease
	if n, err := s.Release(context.Background(), c.Token, []int64{1}); n != 1 || err != nil {
		t.Fatalf("release after the lease: %d, %v; want the session's ledger to take the message back", n, err)
	}
	<-ended
	s.mu.Lock()
	cur := s.cur
	s.mu.Unlock()
	if cur != nil {
		t.Fatal("the session's ledger is still attached after its end")
	}
}

// A publish the session's end cancelled is abandoned (its error wraps
// strategy.ErrAbandoned, so that the core neither pauses nor counts),
// while the broker's answer that is not
// a cancellation keeps its class; a claim whose session ended is not
// published at all.
func TestStreamSink_SessionEndAbandonsTheCancelledPublishes(t *testing.T) {
	s := newStreamStrategy(slog.New(slog.DiscardHandler))
	ta := attachTest(s)
	ta.add(s, "a", "b", "c")
	c, _ := s.Claim(context.Background(), store.ClaimParams{Limit: 10})
	permanent := fmt.Errorf("%w: MESSAGE_TOO_LARGE", sink.ErrPermanent)
	entered := make(chan struct{})
	snk := sinkFunc(func(ctx context.Context, recs []outbox.Record) []error {
		close(entered)
		<-ctx.Done()
		return []error{ctx.Err(), fmt.Errorf("%w: %w", sink.ErrUnavailable, ctx.Err()), permanent}
	})
	k := streamSink{Sink: snk, s: s}
	done := make(chan []error)
	go func() { done <- k.Publish(context.Background(), c.Records) }()
	<-entered
	ta.cancel() // the session ends
	errs := <-done
	for i, err := range errs[:2] {
		if !errors.Is(err, strategy.ErrAbandoned) {
			t.Errorf("cancelled publish %d: %v; want strategy.ErrAbandoned", i, err)
		}
	}
	if !errors.Is(errs[2], permanent) || errors.Is(errs[2], strategy.ErrAbandoned) {
		t.Errorf("the broker's permanent answer became %v; want it kept", errs[2])
	}
	for i, err := range k.Publish(context.Background(), c.Records) {
		if !errors.Is(err, strategy.ErrAbandoned) {
			t.Errorf("publish %d after the session ended: %v; want strategy.ErrAbandoned without publishing", i, err)
		}
	}
}

type sinkFunc func(context.Context, []outbox.Record) []error

func (f sinkFunc) Publish(ctx context.Context, recs []outbox.Record) []error { return f(ctx, recs) }
func (sinkFunc) Close() error                                                { return nil }

// testRec is message seq of aggregate agg.
func testRec(seq int64, agg string) outbox.Record {
	return outbox.Record{Seq: seq, Message: outbox.Message{ID: uuid.New(), AggregateType: "O", AggregateID: agg, Topic: "t"}}
}

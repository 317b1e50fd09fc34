package relay_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/relay/strategy"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/store"
)

// fakeStrategy is an in-memory strategy.Strategy without wake-ups: each
// claim takes one due message, and with combined, a MarkSent that is asked
// for the next batch lingers and claims it. It logs its calls, and the
// relay's Hooks.Published, with their times.
type fakeStrategy struct {
	combined bool

	mu      sync.Mutex
	due     []outbox.Record
	events  []event
	lingers []time.Duration // how long each next.Linger called by MarkSent took
}

type event struct {
	what string
	at   time.Time
}

func (f *fakeStrategy) log(what string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, event{what, time.Now()})
}

func (f *fakeStrategy) add(recs ...outbox.Record) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.due = append(f.due, recs...)
}

// take claims the first due message, if any.
func (f *fakeStrategy) take() store.Claim {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := store.Claim{Token: uuid.New()}
	if len(f.due) > 0 {
		c.Records, f.due = f.due[:1], f.due[1:]
	}
	return c
}

func (f *fakeStrategy) Claim(context.Context, store.ClaimParams) (store.Claim, error) {
	c := f.take()
	f.log(fmt.Sprintf("Claim %d", len(c.Records)))
	return c, nil
}

func (f *fakeStrategy) MarkSent(_ context.Context, _ uuid.UUID, seqs []int64, next *strategy.Next) (int64, *store.Claim, error) {
	if next == nil || !f.combined {
		f.log(fmt.Sprintf("MarkSent next=%v", next != nil))
		return int64(len(seqs)), nil, nil
	}
	start := time.Now()
	if !next.Linger() {
		f.log("MarkSent after a linger, wanting nothing")
		return int64(len(seqs)), nil, nil
	}
	f.mu.Lock()
	f.lingers = append(f.lingers, time.Since(start))
	f.mu.Unlock()
	c := f.take()
	f.log(fmt.Sprintf("MarkSent and Claim %d", len(c.Records)))
	return int64(len(seqs)), &c, nil
}

func (f *fakeStrategy) MarkFailed(_ context.Context, _ uuid.UUID, failures []store.Failure) (int64, error) {
	return int64(len(failures)), nil
}

func (f *fakeStrategy) Release(_ context.Context, _ uuid.UUID, seqs []int64) (int64, error) {
	f.log("Release")
	return int64(len(seqs)), nil
}

func (f *fakeStrategy) Wakeups() store.Notifier { return nil }

func (f *fakeStrategy) Close(context.Context) error {
	f.log("Close")
	return nil
}

// all returns the events so far.
func (f *fakeStrategy) all() []event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.events)
}

// snapshot returns the events so far, without the empty claims.
func (f *fakeStrategy) snapshot() []event {
	return slices.DeleteFunc(f.all(), func(e event) bool { return e.what == "Claim 0" })
}

func whats(events []event) []string {
	w := make([]string, len(events))
	for i, e := range events {
		w[i] = e.what
	}
	return w
}

func fakeRecords(n int) []outbox.Record {
	recs := make([]outbox.Record, n)
	for i := range recs {
		recs[i] = outbox.Record{Seq: int64(i + 1), Message: outbox.Message{ID: uuid.New(), AggregateType: "Order",
			AggregateID: fmt.Sprintf("F-%d", i), EventType: "OrderPlaced", Payload: []byte(`{}`)}, CreatedAt: time.Now()}
	}
	return recs
}

// strategyConfig is a one-worker relay over st that lingers d after every
// batch smaller than BatchSize, and logs Hooks.Published among st's events.
func strategyConfig(t *testing.T, st *fakeStrategy, d time.Duration) relay.Config {
	return relay.Config{Strategy: st, Sink: &fakeSink{}, Workers: 1, BatchSize: 10,
		PollInterval: 20 * time.Millisecond, Lease: 5 * time.Second, Linger: d, LingerAbove: -1,
		Logger: testLogger(t), Hooks: relay.Hooks{Published: func(outbox.Record, time.Duration) { st.log("Published") }}}
}

// A strategy that marks without claiming (MarkSent returns no claim) is
// asked for the next batch, and the relay lingers after the mark and its
// Hooks.Published, then claims on its own.
func TestRelay_StrategyWithoutClaim_LingersAfterTheMarkThenClaims(t *testing.T) {
	t.Parallel()
	const linger = 300 * time.Millisecond
	st := &fakeStrategy{}
	st.add(fakeRecords(2)...)
	startRelay(t, strategyConfig(t, st, linger))
	eventually(t, 10*time.Second, "both messages published", func() bool {
		return len(st.all()) >= 6
	})
	ev := st.all()[:6]
	want := []string{"Claim 1", "MarkSent next=true", "Published", "Claim 1", "MarkSent next=true", "Published"}
	if !slices.Equal(whats(ev), want) {
		t.Fatalf("events %v; want %v", whats(ev), want)
	}
	if waited := ev[3].at.Sub(ev[2].at); waited < linger {
		t.Fatalf("claimed again %v after the first batch's Hooks.Published; want the %v linger first", waited, linger)
	}
}

// A strategy that claims with the mark (MarkSent returns a claim) lingers
// through next.Linger before it, and the relay publishes that claim
// without calling Claim.
func TestRelay_StrategyClaimingWithTheMark_ItsClaimIsTheNextBatch(t *testing.T) {
	t.Parallel()
	const linger = 300 * time.Millisecond
	st := &fakeStrategy{combined: true}
	st.add(fakeRecords(2)...)
	startRelay(t, strategyConfig(t, st, linger))
	eventually(t, 10*time.Second, "both messages published", func() bool {
		return len(st.all()) >= 5
	})
	want := []string{"Claim 1", "MarkSent and Claim 1", "Published", "MarkSent and Claim 0", "Published"}
	if got := whats(st.all()[:5]); !slices.Equal(got, want) {
		t.Fatalf("events %v; want %v (one Claim: the second batch came with the first's mark)", got, want)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for i, d := range st.lingers[:2] {
		if d < linger {
			t.Fatalf("next.Linger %d returned after %v; want the %v linger", i, d, linger)
		}
	}
}

// The relay closes its strategy once, when it stops, after the mark of the
// batch that was in flight.
func TestRelay_Stop_ClosesTheStrategyOnceAfterTheLastMark(t *testing.T) {
	t.Parallel()
	st := &fakeStrategy{}
	st.add(fakeRecords(1)...)
	release := make(chan struct{})
	cfg := strategyConfig(t, st, 0)
	cfg.Sink = &fakeSink{fn: func(int, outbox.Record) error {
		<-release
		return nil
	}}
	r, err := relay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the message claimed", func() bool { return len(st.snapshot()) > 0 })
	stopped := make(chan error, 1)
	go func() { stopped <- r.Stop(context.Background()) }()
	time.Sleep(50 * time.Millisecond) // Stop waits for the publish
	close(release)
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	want := []string{"Claim 1", "MarkSent next=false", "Published", "Close"}
	if got := whats(st.snapshot()); !slices.Equal(got, want) {
		t.Fatalf("events %v; want %v (Close once, after the last mark)", got, want)
	}
	if err := r.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if got := whats(st.snapshot()); !slices.Equal(got, want) {
		t.Fatalf("events after a second Stop %v; want %v (Close once)", got, want)
	}
}

// A strategy without wake-ups (Wakeups nil) is polled: a message that
// becomes due while the relay is idle is claimed and published.
func TestRelay_StrategyWithoutWakeups_Polls(t *testing.T) {
	t.Parallel()
	st := &fakeStrategy{}
	startRelay(t, strategyConfig(t, st, 0))
	time.Sleep(200 * time.Millisecond) // idle: empty claims, registered nowhere
	st.add(fakeRecords(1)...)
	eventually(t, 10*time.Second, "the message published", func() bool {
		return slices.Contains(whats(st.snapshot()), "Published")
	})
}

// stoppingStrategy claims nothing, then, from its second claim on, stops
// the relay with cause.
type stoppingStrategy struct {
	fakeStrategy
	cause  error
	claims int
}

func (s *stoppingStrategy) Claim(ctx context.Context, p store.ClaimParams) (store.Claim, error) {
	s.mu.Lock()
	s.claims++
	n := s.claims
	s.mu.Unlock()
	if n > 1 {
		return store.Claim{}, fmt.Errorf("reading the source: %w", strategy.Stop(s.cause))
	}
	return s.fakeStrategy.Claim(ctx, p)
}

// A strategy whose Claim returns a strategy.StopError stops the relay:
// Run returns the cause, Err reports it, the strategy is closed, and no
// claim follows.
func TestRelay_StrategyStopErrorStopsTheRelayWithItsCause(t *testing.T) {
	cause := errors.New("replication slot lost")
	s := &stoppingStrategy{cause: cause}
	r, err := relay.New(relay.Config{Strategy: s, Sink: &fakeSink{}, PollInterval: 5 * time.Millisecond,
		Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Run(ctx); !errors.Is(err, cause) {
		t.Fatalf("Run = %v; want the strategy's cause", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Run returned only when its context ended, not when the strategy stopped")
	}
	if err := r.Err(); !errors.Is(err, cause) {
		t.Errorf("Err = %v; want the strategy's cause", err)
	}
	s.mu.Lock()
	claims := s.claims
	s.mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.claims != claims {
		t.Errorf("%d claims after the relay stopped; want none", s.claims-claims)
	}
	if !slices.ContainsFunc(s.events, func(e event) bool { return e.what == "Close" }) {
		t.Errorf("the strategy was not closed: %v", s.events)
	}
}

// abandoningStrategy is a fakeStrategy whose Release gives the messages
// back, due again, and which logs MarkFailed.
type abandoningStrategy struct {
	fakeStrategy
	claimed map[int64]outbox.Record
}

func (s *abandoningStrategy) Claim(ctx context.Context, p store.ClaimParams) (store.Claim, error) {
	c, err := s.fakeStrategy.Claim(ctx, p)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rec := range c.Records {
		s.claimed[rec.Seq] = rec
	}
	return c, err
}

func (s *abandoningStrategy) MarkFailed(_ context.Context, _ uuid.UUID, failures []store.Failure) (int64, error) {
	s.log("MarkFailed")
	return int64(len(failures)), nil
}

func (s *abandoningStrategy) Release(_ context.Context, _ uuid.UUID, seqs []int64) (int64, error) {
	s.log("Release")
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, seq := range seqs {
		s.due = append(s.due, s.claimed[seq])
	}
	return int64(len(seqs)), nil
}

// logLines collects the messages of the log lines.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, r.Message)
	return nil
}
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logLines) WithGroup(string) slog.Handler      { return l }

func (l *logLines) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}

// A publish whose error wraps strategy.ErrAbandoned (here with
// sink.ErrUnavailable too, as a cancelled publish's) is given back with
// Release: the relay does not pause ("broker unavailable" is not logged),
// records no failure (no MarkFailed), reports none (no Hooks.Failed), and
// publishes the message again when it is claimed again.
func TestRelay_AbandonedPublishIsReleasedWithoutPauseOrFailure(t *testing.T) {
	t.Parallel()
	st := &abandoningStrategy{claimed: map[int64]outbox.Record{}}
	st.add(fakeRecords(1)...)
	logs := &logLines{}
	var failed atomic.Int64
	cfg := strategyConfig(t, &st.fakeStrategy, 0)
	cfg.Strategy = st
	cfg.Logger = slog.New(logs)
	cfg.UnavailableBackoffMax = time.Minute
	cfg.Hooks.Failed = func(outbox.Record, error, bool) { failed.Add(1) }
	cfg.Sink = &fakeSink{fn: func(call int, _ outbox.Record) error {
		if call == 1 {
			return fmt.Errorf("%w: %w", strategy.ErrAbandoned, fmt.Errorf("%w: context canceled", sink.ErrUnavailable))
		}
		return nil
	}}
	startRelay(t, cfg)
	eventually(t, 10*time.Second, "the message published again", func() bool {
		return slices.Contains(whats(st.snapshot()), "Published")
	})
	want := []string{"Claim 1", "Release", "Claim 1", "MarkSent next=true", "Published"}
	if got := whats(st.snapshot()); !slices.Equal(got[:len(want)], want) {
		t.Fatalf("events %v; want %v (released, claimed again, no MarkFailed)", got, want)
	}
	if n := failed.Load(); n != 0 {
		t.Errorf("Hooks.Failed called %d times; want none", n)
	}
	lines := logs.all()
	if slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "broker unavailable") }) {
		t.Errorf("logged %q; want no pause for an abandoned publish", lines)
	}
	if !slices.Contains(lines, "released unsent messages") {
		t.Errorf("logged %q; want the release", lines)
	}
}

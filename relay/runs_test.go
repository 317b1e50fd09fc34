package relay_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/relay/strategy"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/store"
)

// runStrategy is an in-memory strategy.Strategy that hands out all its
// records in its first claim, whatever ClaimParams.MaxRun says, and never
// again. It logs the claims' parameters and, in order, the calls that
// settle the records.
type runStrategy struct {
	mu     sync.Mutex
	recs   []outbox.Record
	params []store.ClaimParams
	calls  []settleCall
}

// settleCall is a call of MarkSent, Release or MarkFailed.
type settleCall struct {
	what     string
	seqs     []int64
	failures []store.Failure // MarkFailed's
}

func (s *runStrategy) Claim(_ context.Context, p store.ClaimParams) (store.Claim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.params = append(s.params, p)
	c := store.Claim{Token: uuid.New(), Records: s.recs}
	s.recs = nil
	return c, nil
}

func (s *runStrategy) MarkSent(_ context.Context, _ uuid.UUID, seqs []int64, _ *strategy.Next) (int64, *store.Claim, error) {
	s.log(settleCall{what: "MarkSent", seqs: slices.Clone(seqs)})
	return int64(len(seqs)), nil, nil
}

func (s *runStrategy) MarkFailed(_ context.Context, _ uuid.UUID, failures []store.Failure) (int64, error) {
	c := settleCall{what: "MarkFailed", failures: slices.Clone(failures)}
	for _, f := range failures {
		c.seqs = append(c.seqs, f.Seq)
	}
	s.log(c)
	return int64(len(failures)), nil
}

func (s *runStrategy) Release(_ context.Context, _ uuid.UUID, seqs []int64) (int64, error) {
	s.log(settleCall{what: "Release", seqs: slices.Clone(seqs)})
	return int64(len(seqs)), nil
}

func (s *runStrategy) Wakeups() store.Notifier { return nil }

func (s *runStrategy) Close(context.Context) error { return nil }

func (s *runStrategy) log(c settleCall) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, c)
}

// settled returns the settling calls so far and how many records they
// settled.
func (s *runStrategy) settled() ([]settleCall, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		n += len(c.seqs)
	}
	return slices.Clone(s.calls), n
}

// runSink is a sink.RunSink that answers each record of a call with fn's
// error for it (i is its index in the call; nil: acknowledged) and logs
// the records of each call with the method called.
type runSink struct {
	fn    func(ctx context.Context, i int, rec outbox.Record) error
	mu    sync.Mutex
	calls []sinkCall
}

type sinkCall struct {
	method string
	recs   []outbox.Record
}

func (s *runSink) Publish(ctx context.Context, recs []outbox.Record) []error {
	return s.answer(ctx, "Publish", recs)
}

func (s *runSink) PublishRuns(ctx context.Context, recs []outbox.Record) []error {
	return s.answer(ctx, "PublishRuns", recs)
}

func (s *runSink) Close() error { return nil }

func (s *runSink) answer(ctx context.Context, method string, recs []outbox.Record) []error {
	s.mu.Lock()
	s.calls = append(s.calls, sinkCall{method, slices.Clone(recs)})
	s.mu.Unlock()
	errs := make([]error, len(recs))
	for i, rec := range recs {
		if s.fn != nil {
			errs[i] = s.fn(ctx, i, rec)
		}
	}
	return errs
}

func (s *runSink) called() []sinkCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// plainSink is a runSink as a plain sink.Sink: it has no PublishRuns.
type plainSink struct{ s *runSink }

func (p plainSink) Publish(ctx context.Context, recs []outbox.Record) []error {
	return p.s.Publish(ctx, recs)
}

func (p plainSink) Close() error { return nil }

// logRecords keeps the log records, with their attributes.
type logRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecords) WithGroup(string) slog.Handler      { return l }

// find returns the records whose message contains msg, each as its level,
// message and attributes ("key=value" ...).
func (l *logRecords) find(msg string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var found []string
	for _, r := range l.recs {
		if !strings.Contains(r.Message, msg) {
			continue
		}
		line := r.Level.String() + " " + r.Message
		r.Attrs(func(a slog.Attr) bool {
			line += " " + a.String()
			return true
		})
		found = append(found, line)
	}
	return found
}

// runRecords returns one record per aggregate id of aggs, with seqs 1, 2, ...
func runRecords(aggs ...string) []outbox.Record {
	recs := make([]outbox.Record, len(aggs))
	for i, agg := range aggs {
		recs[i] = outbox.Record{Seq: int64(i + 1), Message: outbox.Message{ID: uuid.New(), AggregateType: "Order",
			AggregateID: agg, EventType: "OrderPlaced", Payload: []byte(`{}`)}, CreatedAt: time.Now()}
	}
	return recs
}

// runResult is what a relay did with one batch.
type runResult struct {
	calls     []settleCall
	failed    []failedCall // Hooks.Failed's
	published []int64      // Hooks.Published's
	logs      *logRecords
}

type failedCall struct {
	seq  int64
	err  error
	dead bool
}

// settleBatch runs a one-worker relay over a runStrategy holding recs and
// snk until every record is settled, or, with stopAfterPublish, stops it
// once the sink was called, with a ShutdownTimeout of 50ms. maxRun is
// Config.MaxRun.
func settleBatch(t *testing.T, recs []outbox.Record, snk sink.Sink, maxRun int, stopAfterPublish bool) runResult {
	t.Helper()
	st := &runStrategy{recs: recs}
	res := runResult{logs: &logRecords{}}
	var mu sync.Mutex
	cfg := relay.Config{Strategy: st, Sink: snk, Workers: 1, BatchSize: 10, MaxRun: maxRun, Linger: -1,
		PollInterval: 20 * time.Millisecond, Lease: 5 * time.Second, ShutdownTimeout: 50 * time.Millisecond,
		Logger: slog.New(res.logs), Hooks: relay.Hooks{
			Published: func(rec outbox.Record, _ time.Duration) {
				mu.Lock()
				defer mu.Unlock()
				res.published = append(res.published, rec.Seq)
			},
			Failed: func(rec outbox.Record, err error, dead bool) {
				mu.Lock()
				defer mu.Unlock()
				res.failed = append(res.failed, failedCall{rec.Seq, err, dead})
			},
		}}
	r, err := relay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the batch settled", func() bool {
		if stopAfterPublish {
			return sinkCalls(snk) > 0
		}
		_, n := st.settled()
		return n >= len(recs)
	})
	if err := r.Stop(context.Background()); err != nil { // waits for the worker: the hooks have run
		t.Fatal(err)
	}
	res.calls, _ = st.settled()
	mu.Lock()
	defer mu.Unlock()
	return res
}

// sinkCalls is the number of calls snk got.
func sinkCalls(snk sink.Sink) int {
	switch s := snk.(type) {
	case *runSink:
		return len(s.called())
	case plainSink:
		return len(s.s.called())
	}
	panic(fmt.Sprintf("no calls of a %T", snk))
}

// settlement is what should become of the records of a batch, by seq.
type settlement struct {
	sent, released, failed []int64
}

// checkSettled checks that res settled the records as want says: marked
// SENT (and reported to Hooks.Published), released, or failed (MarkFailed
// and Hooks.Failed), each once; and that it settled in that order: every
// MarkSent before every Release, every Release before every MarkFailed.
func checkSettled(t *testing.T, res runResult, want settlement) {
	t.Helper()
	got := map[string][]int64{}
	last := map[string]int{}
	first := map[string]int{}
	for i, c := range res.calls {
		got[c.what] = append(got[c.what], c.seqs...)
		if _, ok := first[c.what]; !ok {
			first[c.what] = i
		}
		last[c.what] = i
	}
	sameSeqs(t, "marked SENT", got["MarkSent"], want.sent)
	sameSeqs(t, "released", got["Release"], want.released)
	sameSeqs(t, "marked failed", got["MarkFailed"], want.failed)
	sameSeqs(t, "reported to Hooks.Published", res.published, want.sent)
	var failed []int64
	for _, f := range res.failed {
		failed = append(failed, f.seq)
	}
	sameSeqs(t, "reported to Hooks.Failed", failed, want.failed)
	inOrder := func(before, after string) {
		t.Helper()
		b, okB := last[before]
		a, okA := first[after]
		if okB && okA && b > a {
			t.Errorf("calls %v: a %s after a %s; want every %s first", whatsOf(res.calls), before, after, before)
		}
	}
	inOrder("MarkSent", "Release")
	inOrder("Release", "MarkFailed")
}

func sameSeqs(t *testing.T, what string, got, want []int64) {
	t.Helper()
	got, want = slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Errorf("%s: seqs %v; want %v", what, got, want)
	}
}

func whatsOf(calls []settleCall) []string {
	w := make([]string, len(calls))
	for i, c := range calls {
		w[i] = fmt.Sprintf("%s%v", c.what, c.seqs)
	}
	return w
}

func seqRange(from, to int) []int64 {
	var seqs []int64
	for i := from; i < to; i++ {
		seqs = append(seqs, int64(i+1))
	}
	return seqs
}

// failureClass is a way the first message of a run that is not
// acknowledged can fail, and what the relay does with it.
type failureClass struct {
	name string
	// err is its publish's error; with stopping, the sink returns it only
	// once the relay stops and cancels the publish.
	err      error
	stopping bool
	// released: it is given back, unsent, counting nothing. Otherwise it
	// is failed: check says whether the decided failure is right, and
	// dead is what Hooks.Failed is told.
	released bool
	check    func(store.Failure) bool
	dead     bool
}

var failureClasses = []failureClass{
	{name: "retriable", err: errors.New("NOT_ENOUGH_REPLICAS"),
		check: func(f store.Failure) bool { return f.CountAttempt && !f.Dead && !f.Unavailable }},
	{name: "permanent", err: fmt.Errorf("%w: MESSAGE_TOO_LARGE", sink.ErrPermanent), dead: true,
		check: func(f store.Failure) bool { return f.CountAttempt && f.Dead }},
	{name: "unavailable", err: fmt.Errorf("%w: connection refused", sink.ErrUnavailable),
		check: func(f store.Failure) bool { return f.Unavailable && !f.CountAttempt && !f.Dead }},
	{name: "topic-unavailable", err: &sink.TopicError{Topic: "orders", Err: errors.New("UNKNOWN_TOPIC_OR_PARTITION")},
		check: func(f store.Failure) bool {
			return !f.CountAttempt && !f.Dead && !f.Unavailable && f.Delay >= sink.MinTopicRetryDelay
		}},
	{name: "abandoned", err: fmt.Errorf("%w: the stream ended", strategy.ErrAbandoned), released: true},
	{name: "not-sent", err: fmt.Errorf("%w: the run changes topic here", sink.ErrNotSent), released: true},
	{name: "unavailable-while-stopping", err: fmt.Errorf("%w: context canceled", sink.ErrUnavailable),
		stopping: true, released: true},
}

// followerErr is the error of the k-th record after the failed one of its
// aggregate: one wrapping sink.ErrNotSent, the failed one's own, or one
// that would dead-letter it. None makes the record count.
func followerErr(c failureClass, k int) error {
	switch k % 3 {
	case 1:
		return fmt.Errorf("%w: NOT_ENOUGH_REPLICAS", sink.ErrNotSent)
	case 2:
		if c.stopping {
			return fmt.Errorf("%w: context canceled", sink.ErrUnavailable)
		}
		return c.err
	}
	return fmt.Errorf("%w: MESSAGE_TOO_LARGE", sink.ErrPermanent)
}

// classSink is a RunSink that acknowledges the records of a run before
// position p, fails record p as c says, and the records after it with
// followerErr.
func classSink(c failureClass, p int) *runSink {
	return &runSink{fn: func(ctx context.Context, i int, _ outbox.Record) error {
		switch {
		case i < p:
			return nil
		case i > p:
			return followerErr(c, i-p)
		case c.stopping:
			<-ctx.Done()
		}
		return c.err
	}}
}

// A run of n messages of one aggregate whose message p is not
// acknowledged, for every n from 1 to 5, every p and every way p can fail:
// the run goes to the sink in one call (PublishRuns once it is a run), the
// messages before p are marked SENT, p is failed or given back as its
// class says, and every message after p is given back with Release,
// whatever its own error, counting no attempt and reported to no hook; the
// Release comes before the failure is recorded.
func TestRelay_Run_FailureAtEveryPosition_LaterMessagesAreReleased(t *testing.T) {
	t.Parallel()
	for _, c := range failureClasses {
		for n := 1; n <= 5; n++ {
			for p := range n {
				t.Run(fmt.Sprintf("%s/n=%d/p=%d", c.name, n, p), func(t *testing.T) {
					t.Parallel()
					testRunFailure(t, c, n, p)
				})
			}
		}
	}
}

func testRunFailure(t *testing.T, c failureClass, n, p int) {
	recs := runRecords(slices.Repeat([]string{"A"}, n)...)
	snk := classSink(c, p)
	res := settleBatch(t, recs, snk, 5, c.stopping)

	wantMethod := "PublishRuns"
	if n == 1 {
		wantMethod = "Publish"
	}
	if calls := snk.called(); len(calls) != 1 || calls[0].method != wantMethod || len(calls[0].recs) != n {
		t.Errorf("sink calls %v; want one %s of the %d records", calls, wantMethod, n)
	}
	want := settlement{sent: seqRange(0, p), released: seqRange(p+1, n)}
	if c.released {
		want.released = append(want.released, int64(p+1))
	} else {
		want.failed = []int64{int64(p + 1)}
	}
	checkSettled(t, res, want)
	for _, call := range res.calls {
		if call.what == "MarkFailed" && !c.check(call.failures[0]) {
			t.Errorf("failure recorded for a %s error: %+v", c.name, call.failures[0])
		}
	}
	for _, f := range res.failed {
		if f.dead != c.dead || !errors.Is(f.err, c.err) {
			t.Errorf("Hooks.Failed(%d, %v, dead=%v); want the %s error, dead=%v", f.seq, f.err, f.dead, c.name, c.dead)
		}
	}
	if p < n-1 && !c.stopping {
		if lines := res.logs.find("released unsent messages"); len(lines) != 1 ||
			!strings.Contains(lines[0], "an earlier message of the aggregate was not sent") {
			t.Errorf("release logged as %q; want one line with the followers' reason", lines)
		}
	}
}

// Two aggregates interleaved in one batch (A B A B A B), each with a
// failure at its own position (or none): each aggregate's messages before
// its failure are sent, the failed one is failed, and its later ones are
// released, whatever the other aggregate does.
func TestRelay_Run_InterleavedAggregates_EachFollowsItsOwnFailure(t *testing.T) {
	t.Parallel()
	const perAggregate = 3
	for fa := range perAggregate + 1 { // perAggregate: no failure
		for fb := range perAggregate + 1 {
			t.Run(fmt.Sprintf("A%d/B%d", fa, fb), func(t *testing.T) {
				t.Parallel()
				recs := runRecords("A", "B", "A", "B", "A", "B")
				failAt := map[string]int{"A": fa, "B": fb}
				errOf := map[string]error{"A": errors.New("NOT_ENOUGH_REPLICAS"), "B": fmt.Errorf("%w: MESSAGE_TOO_LARGE", sink.ErrPermanent)}
				snk := &runSink{fn: func(_ context.Context, i int, rec outbox.Record) error {
					k := i / 2 // the record's position in its aggregate
					switch f := failAt[rec.AggregateID]; {
					case k < f:
						return nil
					case k == f:
						return errOf[rec.AggregateID]
					}
					return fmt.Errorf("%w: after a failure", sink.ErrNotSent)
				}}
				res := settleBatch(t, recs, snk, 3, false)
				var want settlement
				for i, rec := range recs {
					switch k, f := i/2, failAt[rec.AggregateID]; {
					case k < f:
						want.sent = append(want.sent, rec.Seq)
					case k == f:
						want.failed = append(want.failed, rec.Seq)
					default:
						want.released = append(want.released, rec.Seq)
					}
				}
				checkSettled(t, res, want)
			})
		}
	}
}

// A sink that breaks the RunSink contract, acknowledging a message after
// an earlier one of its aggregate failed, has put it on the topic: the
// relay marks it SENT and logs, once for the batch, at error level, that
// order on the topic is broken for that aggregate. The message after the
// failure that was not acknowledged is still released.
func TestRelay_Run_AckAfterAFailure_CountsAsSentAndLogsBrokenOrder(t *testing.T) {
	t.Parallel()
	recs := runRecords("A", "A", "A", "A", "A", "B")
	snk := &runSink{fn: func(_ context.Context, i int, _ outbox.Record) error {
		switch i {
		case 1:
			return errors.New("NOT_ENOUGH_REPLICAS")
		case 3:
			return fmt.Errorf("%w: after a failure", sink.ErrNotSent)
		}
		return nil // 2 and 4 against the contract
	}}
	res := settleBatch(t, recs, snk, 5, false)
	checkSettled(t, res, settlement{sent: []int64{1, 3, 5, 6}, failed: []int64{2}, released: []int64{4}})
	lines := res.logs.find("order on the topic is broken")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "ERROR") || !strings.Contains(lines[0], "aggregate_id=A") {
		t.Fatalf("logged %q; want one error line naming aggregate A", lines)
	}
}

// A strategy that hands out a run the relay did not ask for (MaxRun 1) to
// a relay whose sink is not a RunSink: the sink gets only the first
// message of each aggregate, never two of one, and the others are given
// back unsent, counting nothing.
func TestRelay_Run_PlainSinkGetsOneMessagePerAggregate(t *testing.T) {
	t.Parallel()
	recs := runRecords("A", "A", "B", "A", "B")
	snk := &runSink{}
	res := settleBatch(t, recs, plainSink{snk}, 0, false)
	calls := snk.called()
	if len(calls) != 1 || calls[0].method != "Publish" {
		t.Fatalf("sink calls %v; want one Publish", calls)
	}
	if got := seqsOfRecords(calls[0].recs); !slices.Equal(got, []int64{1, 3}) {
		t.Errorf("the sink got seqs %v; want [1 3], the first of each aggregate", got)
	}
	checkSettled(t, res, settlement{sent: []int64{1, 3}, released: []int64{2, 4, 5}})
	if lines := res.logs.find("released unsent messages"); len(lines) != 1 || !strings.Contains(lines[0], "one message per aggregate") {
		t.Errorf("release logged as %q; want the reason", lines)
	}
}

// A message that is not one to publish (Record.Invalid) is dead-lettered
// without reaching the sink, and the later messages of its aggregate do
// not reach it either: they are given back, to follow it. The earlier one
// and the other aggregates are published, without PublishRuns when no run
// is left.
func TestRelay_Run_InvalidMessageHoldsBackTheRestOfItsRun(t *testing.T) {
	t.Parallel()
	recs := runRecords("A", "A", "A", "B")
	recs[1].Invalid = errors.New(`headers["x"]: value must be a string, is a number`)
	snk := &runSink{}
	res := settleBatch(t, recs, snk, 5, false)
	calls := snk.called()
	if len(calls) != 1 || calls[0].method != "Publish" || !slices.Equal(seqsOfRecords(calls[0].recs), []int64{1, 4}) {
		t.Errorf("sink calls %v; want one Publish of seqs 1 and 4", calls)
	}
	checkSettled(t, res, settlement{sent: []int64{1, 4}, failed: []int64{2}, released: []int64{3}})
	if len(res.failed) != 1 || !res.failed[0].dead {
		t.Errorf("failed %v; want the invalid message dead-lettered", res.failed)
	}
}

func seqsOfRecords(recs []outbox.Record) []int64 {
	seqs := make([]int64, len(recs))
	for i, rec := range recs {
		seqs[i] = rec.Seq
	}
	return seqs
}

// Config.MaxRun and MaxRunBytes reach the strategy's claims.
func TestRelay_MaxRunReachesTheClaims(t *testing.T) {
	t.Parallel()
	st := &runStrategy{recs: runRecords("A")}
	startRelay(t, relay.Config{Strategy: st, Sink: &runSink{}, Workers: 1, BatchSize: 10, MaxRun: 4, MaxRunBytes: 5000,
		PollInterval: 20 * time.Millisecond})
	eventually(t, 10*time.Second, "a claim", func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return len(st.params) > 0
	})
	st.mu.Lock()
	defer st.mu.Unlock()
	if p := st.params[0]; p.MaxRun != 4 || p.MaxRunBytes != 5000 || p.Limit != 10 {
		t.Errorf("claim params %+v; want Limit 10, MaxRun 4, MaxRunBytes 5000", p)
	}
}

// MaxRun and MaxRunBytes default to 1 (runs off) and 1 MiB.
func TestConfig_MaxRunDefaults(t *testing.T) {
	t.Parallel()
	cfg := relay.Config{}.WithDefaults()
	if cfg.MaxRun != 1 || cfg.MaxRunBytes != 1<<20 {
		t.Errorf("MaxRun %d, MaxRunBytes %d; want 1 and 1 MiB", cfg.MaxRun, cfg.MaxRunBytes)
	}
}

// MaxRun is at least 1 and at most BatchSize, and above 1 only with a
// sink.RunSink; MaxRunBytes is not negative. A bad value is named, with
// the rule.
func TestNew_RejectsBadMaxRun(t *testing.T) {
	t.Parallel()
	plain := plainSink{&runSink{}}
	runs := &runSink{}
	cases := []struct {
		name        string
		cfg         relay.Config
		field, rule string // "": valid
	}{
		{"negative", relay.Config{Sink: runs, MaxRun: -1}, "MaxRun", "at least 1"},
		{"above BatchSize", relay.Config{Sink: runs, BatchSize: 10, MaxRun: 11}, "MaxRun", "at most BatchSize"},
		{"BatchSize", relay.Config{Sink: runs, BatchSize: 10, MaxRun: 10}, "", ""},
		{"plain sink", relay.Config{Sink: plain, MaxRun: 2}, "MaxRun", "sink.RunSink"},
		{"plain sink, runs off", relay.Config{Sink: plain, MaxRun: 1}, "", ""},
		{"run sink", relay.Config{Sink: runs, MaxRun: 2}, "", ""},
		{"negative bytes", relay.Config{Sink: runs, MaxRunBytes: -1}, "MaxRunBytes", "negative"},
	}
	for _, c := range cases {
		c.cfg.Store = nopQueue{}
		_, err := relay.New(c.cfg)
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%s: %v; want it valid", c.name, err)
		case c.field != "" && (!errors.Is(err, relay.ErrInvalidConfig) ||
			!strings.Contains(err.Error(), c.field+" ") || !strings.Contains(err.Error(), c.rule)):
			t.Errorf("%s: got %v; want ErrInvalidConfig naming %s and %q", c.name, err, c.field, c.rule)
		}
	}
}

package failure_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/relay/failure"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/store"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func record(attempts int) outbox.Record {
	return outbox.Record{Seq: 42, Attempts: attempts, Message: outbox.Message{ID: uuid.New(),
		AggregateType: "Order", AggregateID: "o-1", EventType: "OrderPlaced"}}
}

// Each class of error gets what the package documents: whether the
// attempt counts, whether the message is dead, and the range its delay
// falls in (jitter included).
func TestPolicy_DecideEachClass(t *testing.T) {
	retriable := errors.New("NOT_ENOUGH_REPLICAS")
	permanent := fmt.Errorf("%w: MESSAGE_TOO_LARGE", sink.ErrPermanent)
	unavailable := fmt.Errorf("%w: connection refused", sink.ErrUnavailable)
	topic := &sink.TopicError{Topic: "orders", Err: errors.New("UNKNOWN_TOPIC_OR_PARTITION"), Since: t0.Add(-10 * time.Second)}
	invalid := record(0)
	invalid.Invalid = errors.New(`headers: not a JSON object`)
	policy := failure.Policy{MaxAttempts: 5, RetryBase: time.Second, RetryMax: 10 * time.Second}

	for _, tc := range []struct {
		name           string
		rec            outbox.Record
		err            error
		count, dead    bool
		minDel, maxDel time.Duration
		unavailable    bool
	}{
		{"retriable, first attempt", record(0), retriable, true, false, time.Second, 2 * time.Second, false},
		{"retriable, third attempt", record(2), retriable, true, false, 4 * time.Second, 8 * time.Second, false},
		{"retriable, the attempt below the limit, capped at RetryMax", record(3), retriable, true, false, 5 * time.Second, 10 * time.Second, false},
		{"retriable, the attempt that reaches the limit", record(4), retriable, true, true, 5 * time.Second, 10 * time.Second, false},
		{"retriable, past the limit", record(7), retriable, true, true, 5 * time.Second, 10 * time.Second, false},
		{"permanent: dead at once", record(0), permanent, true, true, 0, 0, false},
		{"invalid record: dead at once whatever the error", invalid, retriable, true, true, 0, 0, false},
		{"topic unavailable: half the time it has been, no attempt", record(3), topic, false, false, 4 * time.Second, 5 * time.Second, false},
		{"topic unavailable without a time: the least delay", record(0), fmt.Errorf("%w: x", sink.ErrTopicUnavailable), false, false,
			sink.MinTopicRetryDelay, sink.MinTopicRetryDelay, false},
		{"broker unavailable: the pause, no attempt", record(9), unavailable, false, false, failure.PauseStart, failure.PauseStart, true},
		{"deadline exceeded counts as unavailable", record(0), context.DeadlineExceeded, false, false, failure.PauseStart, failure.PauseStart, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 50 { // the jitter is random
				f := policy.Decide(tc.rec, tc.err, t0)
				if f.Seq != tc.rec.Seq || f.Error != tc.err.Error() {
					t.Fatalf("seq %d, error %q; want %d, %q", f.Seq, f.Error, tc.rec.Seq, tc.err.Error())
				}
				if f.CountAttempt != tc.count || f.Dead != tc.dead || f.Unavailable != tc.unavailable {
					t.Fatalf("count %t, dead %t, unavailable %t; want %t, %t, %t",
						f.CountAttempt, f.Dead, f.Unavailable, tc.count, tc.dead, tc.unavailable)
				}
				if !tc.dead && (f.Delay < tc.minDel || f.Delay > tc.maxDel) {
					t.Fatalf("delay %s; want within [%s, %s]", f.Delay, tc.minDel, tc.maxDel)
				}
			}
		})
	}
}

// A zero Policy takes the defaults: 10 attempts, 1s doubling up to 300s.
func TestPolicy_ZeroTakesTheDefaults(t *testing.T) {
	var p failure.Policy
	err := errors.New("retriable")
	if f := p.Decide(record(failure.DefaultMaxAttempts-2), err, t0); f.Dead {
		t.Fatalf("attempt %d of %d dead", failure.DefaultMaxAttempts-1, failure.DefaultMaxAttempts)
	}
	if f := p.Decide(record(failure.DefaultMaxAttempts-1), err, t0); !f.Dead {
		t.Fatalf("attempt %d of %d not dead", failure.DefaultMaxAttempts, failure.DefaultMaxAttempts)
	}
	for range 100 {
		if d := p.Decide(record(0), err, t0).Delay; d < failure.DefaultRetryBase || d > 2*failure.DefaultRetryBase {
			t.Fatalf("first retry after %s; want within [1s, 2s]", d)
		}
		if d := p.Decide(record(20), err, t0).Delay; d < failure.DefaultRetryMax/2 || d > failure.DefaultRetryMax {
			t.Fatalf("retry after 21 attempts after %s; want within [150s, 300s]", d)
		}
	}
}

// The jitter spreads the retries of messages that failed together over
// the upper half of the delay: never above it, never below half.
func TestPolicy_JitterWithinTheUpperHalf(t *testing.T) {
	p := failure.Policy{MaxAttempts: 100, RetryBase: 100 * time.Millisecond, RetryMax: time.Minute}
	want := 800 * time.Millisecond // 100ms·2^3 after three attempts
	seen := map[time.Duration]bool{}
	for range 500 {
		d := p.Decide(record(2), errors.New("retriable"), t0).Delay
		if d > want || d < want/2 {
			t.Fatalf("delay %s; want within [%s, %s]", d, want/2, want)
		}
		seen[d] = true
	}
	if len(seen) < 100 {
		t.Fatalf("%d distinct delays in 500; want a jitter that spreads them", len(seen))
	}
}

// An unreachable broker pauses the relay that the Policy belongs to:
// each such failure starts or lengthens the Policy's Pause.
func TestPolicy_UnavailableStartsThePause(t *testing.T) {
	pause := failure.NewPause(4 * time.Second)
	p := failure.Policy{Pause: pause}
	unavailable := fmt.Errorf("%w: x", sink.ErrUnavailable)
	if f := p.Decide(record(0), unavailable, t0); f.Delay != failure.PauseStart {
		t.Fatalf("first delay %s; want %s", f.Delay, failure.PauseStart)
	}
	if got := pause.Remaining(t0); got != failure.PauseStart {
		t.Fatalf("pause %s; want %s", got, failure.PauseStart)
	}
	if f := p.Decide(record(0), unavailable, t0.Add(time.Second)); f.Delay != 2*failure.PauseStart {
		t.Fatalf("delay after the pause %s; want %s", f.Delay, 2*failure.PauseStart)
	}
	if f := p.Decide(record(0), errors.New("retriable"), t0.Add(time.Second)); pause.Remaining(t0.Add(time.Second)) != time.Second || !f.CountAttempt {
		t.Fatalf("a retriable error changed the pause or did not count")
	}
}

// The pause starts at 500ms, doubles for a failure after it ended (not for
// failures during it, which only lengthen it), stops at its maximum, and
// starts over after Reset.
func TestPause_DoublesUpToItsMaxAndResets(t *testing.T) {
	type step struct {
		at        time.Duration // since t0; -1: Reset
		want      time.Duration // Next's result
		remaining time.Duration // Remaining right after
	}
	const reset = -1
	for _, tc := range []struct {
		name  string
		max   time.Duration
		steps []step
	}{
		{"doubles after each pause, up to max", 3 * time.Second, []step{
			{0, 500 * time.Millisecond, 500 * time.Millisecond},
			{600 * time.Millisecond, time.Second, time.Second},
			{1700 * time.Millisecond, 2 * time.Second, 2 * time.Second},
			{3800 * time.Millisecond, 3 * time.Second, 3 * time.Second},
			{6900 * time.Millisecond, 3 * time.Second, 3 * time.Second},
		}},
		{"failures during a pause lengthen it without doubling", time.Minute, []step{
			{0, 500 * time.Millisecond, 500 * time.Millisecond},
			{300 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond},
			{700 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond},
			{1300 * time.Millisecond, time.Second, time.Second},
		}},
		{"reset starts over", time.Minute, []step{
			{0, 500 * time.Millisecond, 500 * time.Millisecond},
			{time.Second, time.Second, time.Second},
			{reset, 0, 0},
			{3 * time.Second, 500 * time.Millisecond, 500 * time.Millisecond},
		}},
		{"a max below the start caps the first pause", 200 * time.Millisecond, []step{
			{0, 200 * time.Millisecond, 200 * time.Millisecond},
			{time.Second, 200 * time.Millisecond, 200 * time.Millisecond},
		}},
		{"no max: the default", 0, []step{
			{0, 500 * time.Millisecond, 500 * time.Millisecond},
			{time.Hour, time.Second, time.Second},
			{2 * time.Hour, 2 * time.Second, 2 * time.Second},
			{3 * time.Hour, 4 * time.Second, 4 * time.Second},
			{4 * time.Hour, 8 * time.Second, 8 * time.Second},
			{5 * time.Hour, 16 * time.Second, 16 * time.Second},
			{6 * time.Hour, failure.DefaultPauseMax, failure.DefaultPauseMax},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := failure.NewPause(tc.max)
			if got := p.Remaining(t0); got != 0 {
				t.Fatalf("a new pause has %s remaining; want 0", got)
			}
			var last time.Duration
			for i, s := range tc.steps {
				if s.at == reset {
					p.Reset()
					if got := p.Remaining(t0.Add(last)); got != 0 {
						t.Fatalf("step %d: %s remaining after Reset; want 0", i, got)
					}
					continue
				}
				last = s.at
				if got := p.Next(t0.Add(s.at)); got != s.want {
					t.Fatalf("step %d: Next = %s; want %s", i, got, s.want)
				}
				if got := p.Remaining(t0.Add(s.at)); got != s.remaining {
					t.Fatalf("step %d: Remaining = %s; want %s", i, got, s.remaining)
				}
				if got := p.Remaining(t0.Add(s.at + s.want)); got != 0 {
					t.Fatalf("step %d: %s remaining once the pause is over; want 0", i, got)
				}
			}
		})
	}
}

// Workers share one Pause: concurrent failures, reads and resets are
// safe (run with -race), every pause stays within [start, max], and none
// lasts longer than max after the last failure.
func TestPause_ConcurrentUse(t *testing.T) {
	p := failure.NewPause(2 * time.Second)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range 500 {
				now := t0.Add(time.Duration(i) * 100 * time.Millisecond)
				if d := p.Next(now); d < failure.PauseStart || d > 2*time.Second {
					t.Errorf("pause %s; want within [%s, 2s]", d, failure.PauseStart)
					return
				}
				_ = p.Remaining(now)
				if i%50 == 0 {
					p.Reset()
				}
			}
		})
	}
	wg.Wait()
	if d := p.Remaining(t0.Add(499 * 100 * time.Millisecond)); d > 2*time.Second {
		t.Fatalf("%s remaining after the last failure; want at most the max, 2s", d)
	}
}

// capture collects log records.
type capture struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (c *capture) Enabled(context.Context, slog.Level) bool { return true }
func (c *capture) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recs = append(c.recs, r)
	return nil
}
func (c *capture) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *capture) WithGroup(string) slog.Handler      { return c }

func attrs(r slog.Record) map[string]string {
	m := map[string]string{}
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	return m
}

// Each decided failure is logged once with its line and level (ERROR dead,
// WARN counted, DEBUG not the message's fault, with a line of its own for
// an unreachable broker that does not claim a retry was scheduled), the
// message's identity,
// its attempts and the error, and passed to the Failed hook.
func TestReporter_LinesLevelsAndHook(t *testing.T) {
	err := errors.New("NOT_ENOUGH_REPLICAS")
	custom := failure.Lines{Dead: "dead (custom)", Retry: "retry (custom)", Wait: "wait (custom)"}
	for _, tc := range []struct {
		name     string
		lines    failure.Lines
		f        store.Failure
		level    slog.Level
		msg      string
		attempts string
		retryIn  string
	}{
		{"dead", failure.Lines{}, store.Failure{CountAttempt: true, Dead: true}, slog.LevelError, failure.RelayLines.Dead, "4", ""},
		{"counted", failure.Lines{}, store.Failure{CountAttempt: true, Delay: 8 * time.Second}, slog.LevelWarn, failure.RelayLines.Retry, "4", "8s"},
		{"not counted", failure.Lines{}, store.Failure{Delay: time.Second}, slog.LevelDebug, failure.RelayLines.Wait, "3", "1s"},
		{"broker unreachable", failure.Lines{}, store.Failure{Delay: time.Second, Unavailable: true}, slog.LevelDebug, failure.UnavailableLine, "3", "1s"},
		{"custom, broker unreachable", custom, store.Failure{Delay: time.Second, Unavailable: true}, slog.LevelDebug, failure.UnavailableLine, "3", "1s"},
		{"custom dead", custom, store.Failure{CountAttempt: true, Dead: true}, slog.LevelError, custom.Dead, "4", ""},
		{"custom counted", custom, store.Failure{CountAttempt: true, Delay: time.Second}, slog.LevelWarn, custom.Retry, "4", "1s"},
		{"custom not counted", custom, store.Failure{Delay: time.Second}, slog.LevelDebug, custom.Wait, "3", "1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &capture{}
			rec := record(3)
			tc.f.Seq, tc.f.Error = rec.Seq, err.Error()
			var hooked []bool
			rp := failure.Reporter{Log: slog.New(c), Lines: tc.lines, Failed: func(r outbox.Record, e error, dead bool) {
				if r.ID != rec.ID || e != err {
					t.Errorf("hook got %s, %v; want %s, %v", r.ID, e, rec.ID, err)
				}
				hooked = append(hooked, dead)
			}}
			rp.Report(rec, err, tc.f)
			if len(c.recs) != 1 || len(hooked) != 1 || hooked[0] != tc.f.Dead {
				t.Fatalf("%d lines, hook calls %v; want 1 line and one call with dead=%t", len(c.recs), hooked, tc.f.Dead)
			}
			line := c.recs[0]
			if line.Level != tc.level || line.Message != tc.msg {
				t.Fatalf("logged %s %q; want %s %q", line.Level, line.Message, tc.level, tc.msg)
			}
			got := attrs(line)
			want := map[string]string{"message_id": rec.ID.String(), "seq": "42", "aggregate_type": "Order",
				"aggregate_id": "o-1", "event_type": "OrderPlaced", "attempts": tc.attempts, "error": err.Error()}
			if tc.retryIn != "" {
				want["retry_in"] = tc.retryIn
			}
			if len(got) != len(want) {
				t.Fatalf("attributes %v; want %v", got, want)
			}
			for k, v := range want {
				if got[k] != v {
					t.Fatalf("attribute %s = %q; want %q (all: %v)", k, got[k], v, got)
				}
			}
		})
	}
}

// A Reporter without a logger logs to slog.Default, and one without a
// hook only logs.
func TestReporter_ZeroValueLogsToTheDefault(t *testing.T) {
	c := &capture{}
	prev := slog.Default()
	slog.SetDefault(slog.New(c))
	t.Cleanup(func() { slog.SetDefault(prev) })
	failure.Reporter{}.Report(record(0), errors.New("x"), store.Failure{Seq: 42, Error: "x", CountAttempt: true, Dead: true})
	if len(c.recs) != 1 || !strings.Contains(c.recs[0].Message, "dead-lettered") {
		t.Fatalf("default logger got %d lines; want the dead-letter line", len(c.recs))
	}
}

func TestSinkResults(t *testing.T) {
	errA := errors.New("a")
	errs, bug := failure.SinkResults([]error{nil, errA}, 2)
	if bug != nil || len(errs) != 2 || errs[0] != nil || errs[1] != errA {
		t.Fatalf("right count: %v, %v; want the results unchanged and no bug", errs, bug)
	}
	for _, got := range [][]error{nil, {nil}, {nil, nil, nil}} {
		errs, bug := failure.SinkResults(got, 2)
		if bug == nil || len(errs) != 2 {
			t.Fatalf("%d results for 2: %v, %v; want 2 errors and a bug", len(got), errs, bug)
		}
		for _, err := range errs {
			if !errors.Is(err, sink.ErrUnavailable) || !errors.Is(err, bug) {
				t.Fatalf("%v: want an error wrapping sink.ErrUnavailable and the bug", err)
			}
		}
	}
}

package cdc

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/relay/strategy"
	"github.com/outbox-dev/outbox/store"
)

// streamStrategy is the stream's strategy.Strategy, driven by the relay
// core (Relay.core): its claims hand out the ready messages of the current
// session's ledger, and its marks acknowledge, fail or give back messages
// of the ledger and hand what that leaves to record to the session's
// recorder, under the mutex, so that the recorder gets the ledger's
// changes in the order they were made (lock order: mu, then the
// recorder's). Between sessions there is no ledger: claims are empty and
// marks change nothing (they return 0, which the core logs as "lease was
// taken over": here it means that the session ended).
type streamStrategy struct {
	log   *slog.Logger
	wakes wakeups

	mu  sync.Mutex // guards cur and the ledger's state
	cur *attachment
}

var _ strategy.Strategy = (*streamStrategy)(nil)

// attachment is one session's ledger and recorder, attached to the
// strategy while the session streams.
type attachment struct {
	l   *ledger
	rec *recorder
	// ctx ends the publishes of the session's claims (streamSink): when the
	// session ends, or the relay's publishes are cancelled.
	ctx    context.Context
	cancel context.CancelFunc
	// closed: the session ends; Claim hands out nothing more, marks still
	// count (their records are the last of the session).
	closed bool
	// returned gets a token whenever a claim's messages came back (a mark
	// or a release), for the session's end (waitReturned).
	returned chan struct{}
	// token is the slot's lease token of the session's lead, taken when
	// the session started streaming: its records are fenced by it.
	token uuid.UUID
}

func newStreamStrategy(log *slog.Logger) *streamStrategy {
	return &streamStrategy{log: log}
}

// attach makes a the current session's; the previous one must be detached.
func (s *streamStrategy) attach(a *attachment) {
	s.mu.Lock()
	s.cur = a
	s.mu.Unlock()
}

// closeClaims stops a's claims: Claim hands out nothing more from it.
func (s *streamStrategy) closeClaims(a *attachment) {
	s.mu.Lock()
	a.closed = true
	s.mu.Unlock()
}

// detach ends a: marks of its claims that come later change nothing.
func (s *streamStrategy) detach(a *attachment) {
	s.mu.Lock()
	if s.cur == a {
		s.cur = nil
	}
	s.mu.Unlock()
}

// locked runs fn on the current attachment under the strategy's mutex; a
// is nil between sessions. If the ledger then has ready messages, the
// workers are woken.
func (s *streamStrategy) locked(fn func(a *attachment)) {
	s.mu.Lock()
	a := s.cur
	fn(a)
	ready := a != nil && !a.closed && a.l.ready() > 0
	s.mu.Unlock()
	if ready {
		s.wakes.signal()
	}
}

// sessionOf returns the attachment whose ledger holds recs, the records of
// one claim, handed out and not yet returned; nil when the current
// session's ledger does not (the claim's session ended).
func (s *streamStrategy) sessionOf(recs []outbox.Record) *attachment {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.cur
	if a == nil {
		return nil
	}
	for _, rec := range recs {
		if !a.l.holds(rec) {
			return nil
		}
	}
	return a
}

// returnedFrom signals a's session that messages of its claims came back.
func (a *attachment) returnedFrom() {
	select {
	case a.returned <- struct{}{}:
	default:
	}
}

// Claim hands out up to p.Limit ready messages of the current ledger under
// a new token, in stream order, each only once the earlier messages of its
// aggregate were acknowledged: one per aggregate, or with p.MaxRun above 1
// a run per aggregate, its head and the messages right after it, up to
// p.MaxRun messages and p.MaxRunBytes of payload (see ledger.claim).
func (s *streamStrategy) Claim(_ context.Context, p store.ClaimParams) (store.Claim, error) {
	c := store.Claim{Token: uuid.New()}
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.cur; a != nil && !a.closed {
		c.Records = a.l.claim(c.Token, p.Limit, runLimits{max: p.MaxRun, bytes: p.MaxRunBytes})
	}
	return c, nil
}

// MarkSent acknowledges seqs of token's claim: the next message of each
// aggregate becomes ready once none of it is handed out, and the acknowledged ones go to the session's
// recorder, to be recorded SENT (or deleted). It returns without waiting
// for that record, with the number of token's messages (0 once the
// session is detached). The session calls Hooks.Published for them once
// their record committed; if it does not commit, the session ends and the
// next one reads them again from the slot. The session's end waits for the
// records under way. It never claims and never fails.
func (s *streamStrategy) MarkSent(_ context.Context, token uuid.UUID, seqs []int64, _ *strategy.Next) (int64, *store.Claim, error) {
	var n int
	s.locked(func(a *attachment) {
		if a == nil {
			return
		}
		out := a.l.ack(token, seqs)
		if n = len(out.sent); n > 0 {
			a.rec.hand(out)
			a.returnedFrom()
		}
	})
	return int64(n), nil, nil
}

// MarkFailed records the failures of token's claim. Those that found the
// broker unreachable (store.Failure.Unavailable) go back to the front of
// their aggregates' queues, and nothing is recorded for them; the others are recorded
// FAILED or DEAD_LETTER and their aggregates handed to the table path. It
// returns once that record committed (see settle), with the number of
// token's failures, so that the core reports them only then.
func (s *streamStrategy) MarkFailed(_ context.Context, token uuid.UUID, fs []store.Failure) (int64, error) {
	var unavailable, others []store.Failure
	for _, f := range fs {
		if f.Unavailable {
			unavailable = append(unavailable, f)
		} else {
			others = append(others, f)
		}
	}
	var (
		back, n int
		done    <-chan error
		ending  bool
	)
	s.locked(func(a *attachment) {
		if a == nil {
			return
		}
		var out, more toRecord
		back, out = a.l.fail(token, unavailable) // gives back, records nothing
		n, more = a.l.fail(token, others)
		out.merge(more)
		n += back
		if !out.empty() {
			done = a.rec.hand(out)
		}
		ending = a.closed
		if n > 0 {
			a.returnedFrom()
		}
	})
	if !ending { // at the session's end its publishes were cancelled
		s.logUnavailable(unavailable, back)
	}
	return settle(done, n)
}

// logUnavailable logs that the broker is unreachable when back of the
// claim's failures (unavailable, all of them store.Failure.Unavailable)
// went back.
func (s *streamStrategy) logUnavailable(unavailable []store.Failure, back int) {
	if back == 0 {
		return
	}
	var retryIn time.Duration
	var last string
	for _, f := range unavailable {
		retryIn, last = max(retryIn, f.Delay), f.Error
	}
	s.log.Warn("broker unavailable; the stream waits", slog.String("error", last),
		slog.Int("messages", back), slog.Duration("retry_in", retryIn))
}

// settle waits for the record a mark handed to the recorder (done; nil
// when it handed nothing) and returns n once it committed. When the record
// did not commit (the fence refused it, it failed, or the relay was
// aborted) it returns 0 and no error: 0 tells the core that nothing of the
// claim counts as marked, so that it reports no failure (it logs "lease
// was taken over", meaning here that the record did not commit) and does
// not retry; the recorder's error ends the session,
// whose end returns and logs it, and the next session reads the messages
// again.
func settle(done <-chan error, n int) (int64, error) {
	if done != nil && <-done != nil {
		return 0, nil
	}
	return int64(n), nil
}

// Release gives seqs of token's claim back, to the front of their
// aggregates' queues in the ledger, in order.
func (s *streamStrategy) Release(_ context.Context, token uuid.UUID, seqs []int64) (int64, error) {
	var n int
	s.locked(func(a *attachment) {
		if a == nil {
			return
		}
		var out toRecord
		n, out = a.l.release(token, seqs)
		if !out.empty() {
			a.rec.hand(out)
		}
		if n > 0 {
			a.returnedFrom()
		}
	})
	return int64(n), nil
}

// Wakeups tells the core's workers whenever the ledger has ready messages
// after a change.
func (s *streamStrategy) Wakeups() store.Notifier { return &s.wakes }

// Close does nothing: the slot's lead belongs to the sessions of the
// Relay, not to the core.
func (s *streamStrategy) Close(context.Context) error { return nil }

// wakeups is the stream's store.Notifier: its channel gets a value
// (coalesced) whenever the ledger has ready messages after a change.
type wakeups struct {
	mu     sync.Mutex
	ch     chan struct{}
	closed bool
}

// Notifications returns the channel of wake-ups, closed when ctx is done.
func (w *wakeups) Notifications(ctx context.Context) (<-chan struct{}, error) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	w.ch, w.closed = ch, false
	w.mu.Unlock()
	context.AfterFunc(ctx, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.ch == ch {
			w.closed = true
			close(ch)
		}
	})
	return ch, nil
}

// signal wakes the workers, if they listen.
func (w *wakeups) signal() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch == nil || w.closed {
		return
	}
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// Idle does nothing: the stream's wake-ups cost writers nothing.
func (w *wakeups) Idle(context.Context, string, time.Duration) error { return nil }

// Busy does nothing (see Idle).
func (w *wakeups) Busy(context.Context, string) error { return nil }

package cdc

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox/relay/strategy"
	"github.com/outbox-dev/outbox/store"
)

// streamStrategy is the stream's strategy.Strategy, driven by the relay
// core (Relay.core): its claims hand out the ready messages of the current
// session's ledger, and its marks acknowledge, fail or give back messages
// of the ledger and wait until the recorder has recorded what they leave
// to record. Between sessions there is no ledger: claims are empty and
// marks change nothing (they return 0, which the core reports as fenced).
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

// returnedFrom signals a's session that messages of its claims came back.
func (a *attachment) returnedFrom() {
	select {
	case a.returned <- struct{}{}:
	default:
	}
}

// Claim hands out up to p.Limit ready messages of the current ledger under
// a new token: at most one per aggregate, in stream order, each only once
// the earlier messages of its aggregate were acknowledged.
func (s *streamStrategy) Claim(_ context.Context, p store.ClaimParams) (store.Claim, error) {
	c := store.Claim{Token: uuid.New()}
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.cur; a != nil && !a.closed {
		c.Records = a.l.claim(c.Token, p.Limit)
	}
	return c, nil
}

// MarkSent acknowledges seqs of token's claim: the next message of each
// aggregate becomes ready, and the acknowledged ones are recorded SENT (or
// deleted). It returns once that record committed, with the number of
// token's messages; 0 when the session's record was refused (another relay
// took the slot); an error, which ends the session, when the record
// failed. It never claims.
func (s *streamStrategy) MarkSent(_ context.Context, token uuid.UUID, seqs []int64, _ *strategy.Next) (int64, *store.Claim, error) {
	var out toRecord
	var rec *recorder
	s.locked(func(a *attachment) {
		if a == nil {
			return
		}
		out, rec = a.l.ack(token, seqs), a.rec
		if len(out.sent) > 0 {
			a.returnedFrom()
		}
	})
	n, err := s.settle(rec, out, len(out.sent))
	return n, nil, err
}

// MarkFailed records the failures of token's claim. Those that found the
// broker unreachable (store.Failure.Unavailable) go back, ready again
// first in line, and nothing is recorded for them; the others are recorded
// FAILED or DEAD_LETTER and their aggregates handed to the table path. It
// returns as MarkSent does.
func (s *streamStrategy) MarkFailed(_ context.Context, token uuid.UUID, fs []store.Failure) (int64, error) {
	var (
		n      int
		out    toRecord
		rec    *recorder
		ending bool
	)
	s.locked(func(a *attachment) {
		if a == nil {
			return
		}
		n, out = a.l.fail(token, fs)
		rec, ending = a.rec, a.closed
		if n > 0 {
			a.returnedFrom()
		}
	})
	if !ending { // at the session's end its publishes were cancelled
		s.logUnavailable(fs, n)
	}
	return s.settle(rec, out, n)
}

// logUnavailable logs that the broker is unreachable when fs says so.
func (s *streamStrategy) logUnavailable(fs []store.Failure, n int) {
	if n == 0 {
		return
	}
	var back int
	var retryIn time.Duration
	var last string
	for _, f := range fs {
		if f.Unavailable {
			back++
			retryIn, last = max(retryIn, f.Delay), f.Error
		}
	}
	if back > 0 {
		s.log.Warn("broker unavailable; the stream waits", slog.String("error", last),
			slog.Int("messages", back), slog.Duration("retry_in", retryIn))
	}
}

// settle hands out to rec and waits until it is recorded; it returns n
// then, 0 when the record was refused by the fence, or the record's error.
func (s *streamStrategy) settle(rec *recorder, out toRecord, n int) (int64, error) {
	if rec == nil || out.empty() {
		return int64(n), nil
	}
	err := rec.record(out)
	switch {
	case err == nil:
		return int64(n), nil
	case errors.Is(err, errLostLead) || errors.Is(err, errStopped):
		return 0, nil
	}
	return 0, err
}

// Release gives seqs of token's claim back, ready again.
func (s *streamStrategy) Release(_ context.Context, token uuid.UUID, seqs []int64) (int64, error) {
	var n int
	s.locked(func(a *attachment) {
		if a == nil {
			return
		}
		n = a.l.release(token, seqs)
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

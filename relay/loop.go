package relay

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/outbox-dev/outbox/relay/strategy"
)

// maxQuietPoll caps the delay between the poller's claims during
// Config.IdleAfter.
const maxQuietPoll = 2 * time.Millisecond

// minRegistration is the shortest idle registration (store.Notifier.Idle);
// it is renewed while the relay stays idle and withdrawn when it finds work.
const minRegistration = 30 * time.Second

// dbWaitMin and dbWaitMax bound the wait after a failed claim: it starts at
// dbWaitMin and doubles while claims keep failing.
const (
	dbWaitMin = 100 * time.Millisecond
	dbWaitMax = 5 * time.Second
)

// poll is the poller's claim-publish-mark loop, the first worker's. After
// a claim that found work it claims again at once, so a busy relay never
// waits; with a strategy that can (the claim strategy over pgstore) the
// next claim travels with the mark of the batch just published, in one
// round trip. Idleness is the poller's too (idler): after empty claims for
// Config.IdleAfter (claiming every 1 to 2 ms meanwhile) it registers as
// idle with the strategy's wake-ups (Strategy.Wakeups), so that writers
// notify it, claims once more (a commit whose trigger ran before the
// registration did not notify), and then waits for a notification or
// PollInterval; a strategy without wake-ups polls every PollInterval.
// Writers pay for NOTIFY (it serializes commits) only while a relay waits
// idle; under a steady backlog nobody notifies. An idle relay sends about
// one query per PollInterval. On stop the poller gives back a batch it claimed and did
// not publish, and withdraws its idle registration.
func (r *Relay) poll() {
	w := &worker{r: r}
	idle := &idler{r: r, registration: max(minRegistration, r.cfg.PollInterval+5*time.Second)}
	defer idle.withdraw()
	defer w.release("stopping")
	tick := time.NewTicker(r.cfg.PollInterval)
	defer tick.Stop()
	for {
		b, ok := w.take()
		if !ok {
			return
		}
		if len(b.claim.Records) > 0 {
			idle.busy()
			w.publish(b, true)
			continue
		}
		if !idle.wait(b.woken, tick.C) {
			return
		}
	}
}

// help is the loop of the other workers, the helpers. A full batch wakes
// them (more is due), and so does a publish that waits for its acks longer
// than Config.SlowPublish (watchSlowPublish); a helper keeps claiming only
// while its batches are full or a publish is slow, and otherwise sleeps
// until such a wake-up or a notification. So with a backlog, or a slow
// broker, every worker claims while the others publish, and a relay that
// keeps up claims in one loop (the poller's), where the messages that
// arrive during a publish make the next batch. On stop a helper gives back
// a batch it claimed and did not publish.
func (r *Relay) help() {
	w := &worker{r: r}
	defer w.release("stopping")
	for {
		b, ok := w.take()
		if !ok {
			return
		}
		if len(b.claim.Records) > 0 && w.publish(b, false) {
			continue
		}
		if !r.await(b.woken, nil) {
			return
		}
	}
}

// worker is what one claim-publish-mark loop keeps between its claims.
type worker struct {
	r *Relay
	// next was claimed with the last mark and is not yet published.
	next *batch
	// dbWait is the wait after the last failed claim; 0 once one worked.
	dbWait time.Duration
}

// take returns the batch to publish next: the one the strategy claimed
// with the last mark, or a new claim. While the broker is unreachable (the relay's
// failure.Pause) it gives a batch claimed before that was known back,
// rather than let its lease run down, and waits; after a failed claim it
// waits dbWaitMin, doubling up to dbWaitMax. A claim that returns a
// strategy.StopError stops the relay with its cause. It reports false when
// the relay stops.
func (w *worker) take() (*batch, bool) {
	r := w.r
	for !r.stopping.Closed() {
		if d := r.pause.Remaining(time.Now()); d > 0 {
			w.release("broker unavailable")
			if !r.stopping.Sleep(d) {
				return nil, false
			}
			continue
		}
		b := w.next
		w.next = nil
		if b == nil {
			var err error
			if b, err = r.claim(); err != nil {
				if stop, ok := errors.AsType[*strategy.StopError](err); ok {
					r.stopWith(stop.Err)
					return nil, false
				}
				w.dbWait = min(max(2*w.dbWait, dbWaitMin), dbWaitMax)
				r.claimFailed(err, w.dbWait)
				if !r.stopping.Sleep(w.dbWait) {
					return nil, false
				}
				continue
			}
		}
		w.dbWait = 0
		r.claimWorked()
		return b, true
	}
	return nil, false
}

// publish publishes and marks b, which holds messages. A full batch wakes
// the other workers (more are due). The worker claims again at once when
// claimAgain, when b was full or while a publish is slow, and then the
// mark may claim the next batch as well (w.next, see settleSent);
// publish reports whether the worker claims again at once for one of these
// reasons.
func (w *worker) publish(b *batch, claimAgain bool) bool {
	r := w.r
	full := len(b.claim.Records) >= r.cfg.BatchSize
	if full {
		r.wake.broadcast()
	}
	again := claimAgain || full || r.slow.Load() > 0
	w.next = r.runBatch(b, again)
	return again || r.slow.Load() > 0
}

// release gives the batch claimed with the last mark back, if any.
func (w *worker) release(why string) {
	w.r.release(w.next, why)
	w.next = nil
}

// await waits for a wake-up (woken), a tick (nil: none) or stop; it reports
// false on stop.
func (r *Relay) await(woken <-chan struct{}, tick <-chan time.Time) bool {
	select {
	case <-r.stopping.C():
		return false
	case <-woken:
	case <-tick:
	}
	return true
}

// idler is the poller's idle registration with the strategy's wake-ups (a
// store.Notifier), and the quiet polling before it. Without wake-ups the
// poller polls every PollInterval.
type idler struct {
	r            *Relay
	registration time.Duration // how long one registration lasts
	until        time.Time     // when the registration ends; zero: not registered
	quietSince   time.Time     // the first empty claim since the last that found work
	quietPoll    time.Duration // the wait between claims while quiet
}

// busy records a claim that found work: writers need not notify any more.
func (s *idler) busy() {
	s.quietSince, s.quietPoll = time.Time{}, 0
	if !s.until.IsZero() {
		s.until = time.Time{}
		s.r.notify(func(ctx context.Context) error { return s.r.notifier.Busy(ctx, s.r.cfg.ID) })
	}
}

// wait follows an empty claim, taken with the wake-ups woken. Claims come
// back empty, but maybe only because the relay keeps up, and a
// registration would make every enqueue NOTIFY: during Config.IdleAfter it
// waits 1 to 2 ms. Then it registers (or renews a registration that runs
// out), and returns at once to claim once more; otherwise it waits for a
// notification or tick. It reports false on stop.
func (s *idler) wait(woken <-chan struct{}, tick <-chan time.Time) bool {
	r := s.r
	if r.notifier == nil {
		return r.await(woken, tick)
	}
	if s.until.IsZero() && r.cfg.IdleAfter > 0 && s.quiet() {
		s.quietPoll = min(max(2*s.quietPoll, time.Millisecond), maxQuietPoll)
		t := time.NewTimer(s.quietPoll)
		defer t.Stop()
		return r.await(woken, t.C)
	}
	if time.Until(s.until) < r.cfg.PollInterval+5*time.Second && s.register() {
		return true
	}
	return r.await(woken, tick)
}

// quiet reports whether the claims have come back empty for less than
// Config.IdleAfter.
func (s *idler) quiet() bool {
	if s.quietSince.IsZero() {
		s.quietSince = time.Now()
	}
	return time.Since(s.quietSince) < s.r.cfg.IdleAfter
}

// register registers the relay as idle for s.registration; it reports
// whether that worked.
func (s *idler) register() bool {
	r := s.r
	if !r.notify(func(ctx context.Context) error { return r.notifier.Idle(ctx, r.cfg.ID, s.registration) }) {
		return false
	}
	s.until = time.Now().Add(s.registration)
	return true
}

// withdraw ends the registration, if any: writers need not notify a
// stopped relay.
func (s *idler) withdraw() {
	if s.until.IsZero() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.r.notifier.Busy(ctx, s.r.cfg.ID)
}

// notify runs an Idle or Busy call with a short timeout and reports
// whether it worked; a failure only costs latency (the poll still runs), so
// it is logged as a warning.
func (r *Relay) notify(fn func(context.Context) error) bool {
	ctx, cancel := context.WithTimeout(r.sendCtx, 5*time.Second)
	defer cancel()
	if err := fn(ctx); err != nil {
		r.log.Warn("idle registration failed; relying on polling", slog.Any("error", err))
		return false
	}
	return true
}

// Package relay publishes the outbox: it claims due messages from a
// store.Queue in small batches, publishes them with a sink.Sink, and marks
// them SENT only after the broker acknowledged them.
//
// # Guarantees
//
//   - At least once: a message is marked SENT only after its ack. A relay
//     that dies after the ack but before the mark leaves the message
//     IN_FLIGHT; when its lease expires another relay (or the restarted one)
//     sends it again. Consumers must be idempotent (see package inbox).
//   - No two relays send a message at the same time: claims use
//     FOR UPDATE SKIP LOCKED and a lease; every state change after the claim
//     is fenced by the claim's token, so a relay whose lease was taken over
//     changes nothing.
//   - Order per aggregate: a store claims only the head of each aggregate
//     (no earlier message of it unsent), so a message never overtakes an
//     earlier one of its aggregate, whatever the number of relays. A
//     message that is retrying or dead-lettered blocks only its own
//     aggregate.
//   - Failures: a retriable error counts an attempt and schedules a retry
//     after min(RetryMax, RetryBase*2^attempts) minus up to half of it as
//     jitter; after MaxAttempts the message is DEAD_LETTER. An error the
//     broker will never accept (too large, invalid or unknown topic, not
//     authorized) dead-letters at once with the broker's reason, and so
//     does a message that is itself invalid (a row written with plain SQL
//     whose headers are not a JSON object of string values: see
//     outbox.Record.Invalid), with the column and the rule, without being
//     published; the rest of its batch is published as usual. An
//     unreachable broker is not the message's fault: nothing is counted,
//     and the whole relay pauses with a growing backoff instead of
//     looping.
//   - No database transaction is held open while waiting for the broker:
//     claim and mark are separate short statements.
//   - A missing store (its tables not created, or the wrong schema: an
//     error wrapping store.ErrNotMigrated) costs no event: the relay logs
//     the error, which says how to fix it, when it begins and then every
//     30 seconds, retries every few seconds, and goes on, with a log line,
//     once the tables exist.
//
// # Lifecycle
//
// [Relay.Start] returns once the store's wake-ups are set up (at once with
// Config.DisableListen; within pgstore.ListenProbeTimeout, 5s, behind a
// pooler that does not deliver notifications); [Relay.Stop] stops claiming, waits for
// outstanding acks up to Config.ShutdownTimeout, releases the leases of
// whatever was not sent, closes the relay's listening connection, and is
// safe to call more than once. Once Stop returned, the relay holds no
// connection and runs no goroutine, whatever the context Start was given. [Relay.Run]
// does both around a context, for a main function.
package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/backoff"
	"github.com/outbox-dev/outbox/internal/condlog"
	"github.com/outbox-dev/outbox/internal/failpoint"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/store"
)

// ErrAlreadyStarted is returned by Start when the relay runs already.
var ErrAlreadyStarted = errors.New("relay: already started")

// Relay moves messages from a store to a sink. Create it with [New].
type Relay struct {
	cfg Config
	log *slog.Logger

	wake     waker
	backoff  unavailableBackoff
	notifier store.Notifier // nil unless LISTEN is on and works
	rate     rateMeter      // messages claimed per second, for Config.LingerAbove
	// slow counts the publishes that have waited for acks longer than
	// Config.SlowPublish: while there are any, every worker claims.
	slow atomic.Int64
	// notMigrated holds while claims fail for missing tables.
	notMigrated condlog.Condition

	mu       sync.Mutex
	started  bool
	stopOnce sync.Once
	stopping chan struct{} // closed when Stop is called: claim no more
	sendCtx  context.Context
	sendStop context.CancelFunc // cancels in-flight publishes after ShutdownTimeout
	done     chan struct{}      // closed when every worker has returned
}

// New validates cfg (after defaults) and returns a relay that is not yet
// running. The error wraps ErrInvalidConfig and names the field.
func New(cfg Config) (*Relay, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := &Relay{
		cfg:      cfg,
		log:      cfg.Logger.With(slog.String("relay", cfg.ID)),
		stopping: make(chan struct{}),
		done:     make(chan struct{}),
	}
	r.wake.init()
	r.backoff.max = cfg.UnavailableBackoffMax
	return r, nil
}

// ID returns the relay's instance id, as stored in lease_owner.
func (r *Relay) ID() string { return r.cfg.ID }

// Start sets up the store's wake-ups (LISTEN, unless
// Config.DisableListen), launches the workers and returns. Setting up
// LISTEN takes a round trip, or up to pgstore.ListenProbeTimeout when its
// test notification does not arrive (a transaction pooler); the relay
// then polls. ctx bounds the whole run: when it is done the relay stops as
// if Stop had been called.
func (r *Relay) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return ErrAlreadyStarted
	}
	r.started = true
	r.sendCtx, r.sendStop = context.WithCancel(context.WithoutCancel(ctx))

	// The listening connection lives until the workers have stopped, not
	// until ctx ends: Stop alone closes it.
	listenCtx, stopListening := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if n, ok := r.cfg.Store.(store.Notifier); ok && !r.cfg.DisableListen {
		ch, err := n.Notifications(listenCtx)
		if err != nil {
			r.log.Warn("LISTEN failed; relying on polling", slog.Any("error", err))
		} else {
			r.notifier = n
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range ch {
					r.wake.broadcast()
				}
			}()
		}
	}
	go func() {
		select {
		case <-ctx.Done():
			r.beginStop()
		case <-r.stopping:
		}
	}()
	// A store whose leader holds a lease of its own (store.LeaseKeeper)
	// renews it until the relay has resigned.
	keepCtx, stopKeeping := context.WithCancel(context.WithoutCancel(ctx))
	if k, ok := r.cfg.Store.(store.LeaseKeeper); ok {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k.KeepLease(keepCtx)
		}()
	}
	workers := sync.WaitGroup{}
	for i := range r.cfg.Workers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			r.work(i == 0)
		}()
	}
	go func() {
		workers.Wait()
		r.sendStop()
		r.resign()
		stopListening()
		stopKeeping()
		wg.Wait() // the listening connection is closed, KeepLease returned
		close(r.done)
	}()
	r.log.Info("relay started", slog.Int("workers", r.cfg.Workers), slog.Int("batch_size", r.cfg.BatchSize),
		slog.Duration("lease", r.cfg.Lease), slog.Duration("poll_interval", r.cfg.PollInterval))
	return nil
}

func (r *Relay) beginStop() { r.stopOnce.Do(func() { close(r.stopping) }) }

// resignTimeout bounds the store's Resign when the relay stops.
const resignTimeout = 5 * time.Second

// resign tells a store in which one relay leads (store.Resigner) that this
// one stops, after its workers made their last marks. A failure only means
// that another relay takes over when the lead's lease expires.
func (r *Relay) resign() {
	rs, ok := r.cfg.Store.(store.Resigner)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), resignTimeout)
	defer cancel()
	if err := rs.Resign(ctx); err != nil {
		r.log.Warn("resign failed; another relay takes over when the lease expires", slog.Any("error", err))
	}
}

// Stop stops claiming, waits up to Config.ShutdownTimeout for the acks of
// batches in flight (marking them), then cancels what is left and releases
// its leases. It returns when every worker has finished and the listening
// connection is closed, or with ctx's error if ctx ends first. Calling it again, or on a relay that never
// started, is safe.
func (r *Relay) Stop(ctx context.Context) error {
	r.mu.Lock()
	started := r.started
	r.mu.Unlock()
	r.beginStop()
	if !started {
		return nil
	}
	timer := time.NewTimer(r.cfg.ShutdownTimeout)
	defer timer.Stop()
	select {
	case <-r.done:
		r.log.Info("relay stopped")
		return nil
	case <-timer.C:
		r.log.Warn("shutdown timeout: cancelling unacknowledged publishes and releasing their leases")
		r.sendStop()
	case <-ctx.Done():
		r.sendStop()
		return ctx.Err()
	}
	select {
	case <-r.done:
		r.log.Info("relay stopped")
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stopped returns a channel closed when the relay has stopped.
func (r *Relay) Stopped() <-chan struct{} { return r.done }

// Run starts the relay and blocks until ctx is done, then stops it
// gracefully. It returns nil after a clean stop.
func (r *Relay) Run(ctx context.Context) error {
	if err := r.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), r.cfg.ShutdownTimeout+r.cfg.Lease)
	defer cancel()
	return r.Stop(stopCtx)
}

// maxQuietPoll caps the delay between the poller's claims during
// Config.IdleAfter.
const maxQuietPoll = 2 * time.Millisecond

// minRegistration is the shortest idle registration (store.Notifier.Idle);
// it is renewed while the relay stays idle and withdrawn when it finds work.
const minRegistration = 30 * time.Second

// work is one claim-publish-mark loop. After a claim that found work the
// poller (worker 0) claims again at once, so a busy relay never waits; with
// a store that implements store.MarkClaimer the next claim travels with the
// mark of the batch just published, in one round trip. The other workers
// are helpers: a full batch wakes them (more is due), and so does a
// publish that waits for its acks longer than Config.SlowPublish; a helper
// keeps claiming only while its batches are full or a publish is slow. So
// with a backlog, or a slow broker, every worker claims while the others
// publish, and a relay that keeps up claims in one loop, where the
// messages that arrive during a publish make the next batch, rather than
// in several loops whose claims come back with a message or two each: on
// the bench's 2-core machine, 0.21-0.30 instead of 0.39-0.42 round trips
// per message with writers at full speed, and 1.0 instead of 1.3-1.5 at
// 1,000 events/s in cursor mode. The poller (one worker)
// handles idleness: after an empty claim it registers as idle with the
// store.Notifier (after Config.IdleAfter of empty claims, polling every
// 1 to 2 ms meanwhile), so that writers notify it, claims once more (a
// commit whose trigger ran before the registration did not notify), and then
// waits for a notification or PollInterval. Writers pay for NOTIFY (it
// serializes commits) only while a relay waits idle; under a steady backlog
// nobody notifies. The helpers sleep until a full batch, a slow publish or
// a notification wakes them (see watchSlowPublish). An idle relay sends
// about one query per PollInterval.
func (r *Relay) work(poller bool) {
	var (
		dbBackoff       time.Duration
		registeredUntil time.Time // our idle registration with the notifier
		next            *batch    // claimed with the last mark, not yet published
		quietSince      time.Time // first empty claim since the last one that found work
		quietPoll       time.Duration
	)
	registration := max(minRegistration, r.cfg.PollInterval+5*time.Second)
	defer func() {
		r.release(next, "stopping")
		if !registeredUntil.IsZero() { // writers need not notify a stopped relay
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = r.notifier.Busy(ctx, r.cfg.ID)
		}
	}()
	var ticker <-chan time.Time
	if poller {
		t := time.NewTicker(r.cfg.PollInterval)
		defer t.Stop()
		ticker = t.C
	}
	for {
		if r.isStopping() {
			return
		}
		if d := r.backoff.remaining(); d > 0 {
			// The broker is unreachable: give a batch claimed before that
			// was known back rather than let its lease run down.
			r.release(next, "broker unavailable")
			next = nil
			if !r.sleep(d) {
				return
			}
			continue
		}
		b := next
		next = nil
		if b == nil {
			var err error
			b, err = r.claim()
			if err != nil {
				dbBackoff = min(max(2*dbBackoff, 100*time.Millisecond), 5*time.Second)
				r.claimFailed(err, dbBackoff)
				if !r.sleep(dbBackoff) {
					return
				}
				continue
			}
		}
		dbBackoff = 0
		r.claimWorked()
		if len(b.claim.Records) > 0 {
			quietSince, quietPoll = time.Time{}, 0
			if !registeredUntil.IsZero() {
				registeredUntil = time.Time{}
				r.notify(func(ctx context.Context) error { return r.notifier.Busy(ctx, r.cfg.ID) })
			}
			full := len(b.claim.Records) >= r.cfg.BatchSize
			if full {
				r.wake.broadcast() // more are due: let the other workers join in
			}
			slow := r.slow.Load() > 0
			next = r.runBatch(b, poller || full || slow)
			if !poller && !full && !slow && r.slow.Load() == 0 {
				// A claim that was not full took what was due, so the poller
				// finds what comes next: helpers claim only while batches
				// are full or a publish is slow, or when a notification
				// arrives.
				select {
				case <-r.stopping:
					return
				case <-b.woken:
				}
			}
			continue
		}
		if poller && r.notifier != nil && registeredUntil.IsZero() && r.cfg.IdleAfter > 0 {
			// Claims came back empty, but maybe only because this relay
			// keeps up. Registering as idle would make every enqueue
			// NOTIFY, which serializes the writers' commits: poll a while
			// first.
			if quietSince.IsZero() {
				quietSince = time.Now()
			}
			if time.Since(quietSince) < r.cfg.IdleAfter {
				quietPoll = min(max(2*quietPoll, time.Millisecond), maxQuietPoll)
				t := time.NewTimer(quietPoll)
				select {
				case <-r.stopping:
					t.Stop()
					return
				case <-b.woken:
				case <-t.C:
				}
				t.Stop()
				continue
			}
		}
		if poller && r.notifier != nil && time.Until(registeredUntil) < r.cfg.PollInterval+5*time.Second {
			if r.notify(func(ctx context.Context) error { return r.notifier.Idle(ctx, r.cfg.ID, registration) }) {
				registeredUntil = time.Now().Add(registration)
				continue // claim once more before waiting
			}
		}
		select {
		case <-r.stopping:
			return
		case <-b.woken:
		case <-ticker:
		}
	}
}

// watchSlowPublish watches a publish that starts now; call the function it
// returns when the publish returned. If the publish waits for its acks
// longer than Config.SlowPublish, it counts in r.slow, so that the helpers
// claim beside it, and wakes them; it wakes them again after 2, 4, 8 ...
// times that (at most PollInterval apart) while the publish still waits,
// so that a helper whose claim came back empty claims again for messages
// that arrived meanwhile, without polling a long stall at a high rate.
func (r *Relay) watchSlowPublish() (done func()) {
	if r.cfg.SlowPublish <= 0 {
		return func() {}
	}
	stop := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		d := r.cfg.SlowPublish
		t := time.NewTimer(d)
		defer t.Stop()
		counted := false
		for {
			select {
			case <-stop:
				if counted {
					r.slow.Add(-1)
				}
				return
			case <-t.C:
				if !counted {
					r.slow.Add(1)
					counted = true
				}
				r.wake.broadcast()
				d = min(2*d, r.cfg.PollInterval)
				t.Reset(d)
			}
		}
	}()
	return func() {
		close(stop)
		<-ended
	}
}

// batch is the result of one claim.
type batch struct {
	claim store.Claim
	// start is when the claim was sent: the lease runs from there.
	start time.Time
	// woken was taken before the claim, so that a wake-up after it is not
	// lost when the claim found nothing.
	woken <-chan struct{}
}

// claim claims a batch on its own.
func (r *Relay) claim() (*batch, error) {
	b := &batch{woken: r.wake.wait(), start: time.Now()}
	ctx, cancel := context.WithTimeout(r.sendCtx, r.cfg.Lease/2)
	defer cancel()
	c, err := r.cfg.Store.Claim(ctx, r.claimParams())
	if err != nil {
		return nil, fmt.Errorf("relay: claim: %w", err)
	}
	b.claim = c
	r.claimed(c)
	return b, nil
}

// claimFailed logs a failed claim. Missing tables are logged as an error
// when they are first seen and then at most every 30 seconds (whichever
// worker sees them), not at every retry.
func (r *Relay) claimFailed(err error, retryIn time.Duration) {
	if !errors.Is(err, store.ErrNotMigrated) {
		r.log.Warn("claim failed", slog.Any("error", err), slog.Duration("retry_in", retryIn))
		return
	}
	if r.notMigrated.Holds(time.Now()) {
		r.log.Error("outbox tables missing; the relay retries until they exist", slog.Any("error", err))
	}
}

// claimWorked logs, once, that claims work again after missing tables.
func (r *Relay) claimWorked() {
	if lasted, ended := r.notMigrated.Ended(time.Now()); ended {
		r.log.Info("outbox tables found; the relay goes on", slog.Duration("waited", lasted.Round(time.Second)))
	}
}

func (r *Relay) claimParams() store.ClaimParams {
	return store.ClaimParams{Owner: r.cfg.ID, Limit: r.cfg.BatchSize, Lease: r.cfg.Lease}
}

func (r *Relay) claimed(c store.Claim) {
	if r.cfg.Linger > 0 && r.cfg.LingerAbove > 0 {
		r.rate.add(time.Now(), len(c.Records))
	}
	if len(c.Records) > 0 && r.cfg.Hooks.Claimed != nil {
		r.cfg.Hooks.Claimed(len(c.Records))
	}
}

// release gives the messages of a batch that was claimed but not published
// back (nil or empty: nothing to do).
func (r *Relay) release(b *batch, why string) {
	if b == nil || len(b.claim.Records) == 0 {
		return
	}
	seqs := make([]int64, len(b.claim.Records))
	for i, rec := range b.claim.Records {
		seqs[i] = rec.Seq
	}
	n, err := r.mark(b.start.Add(r.cfg.Lease), func(ctx context.Context) (int64, error) {
		return r.cfg.Store.Release(ctx, b.claim.Token, seqs)
	})
	if err != nil {
		r.log.Error("release failed; the messages become due when the lease expires", slog.Any("error", err))
		return
	}
	r.fenced(b.claim.Token, len(seqs), n)
	r.log.Debug("released claimed messages before publishing them", slog.String("reason", why), slog.Int64("messages", n))
}

// notify runs an Idle or Busy call with a short timeout; a failure only
// costs latency (the poll still runs), so it is logged, not returned.
func (r *Relay) notify(fn func(context.Context) error) bool {
	ctx, cancel := context.WithTimeout(r.sendCtx, 5*time.Second)
	defer cancel()
	if err := fn(ctx); err != nil {
		r.log.Warn("idle registration failed; relying on polling", slog.Any("error", err))
		return false
	}
	return true
}

func (r *Relay) isStopping() bool {
	select {
	case <-r.stopping:
		return true
	default:
		return false
	}
}

// sleep waits d or until stop; it reports false on stop.
func (r *Relay) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.stopping:
		return false
	}
}

// runBatch publishes and marks a claimed batch. If claimNext, the store
// can, and the relay is neither stopping nor pausing, the mark of what was
// sent also claims the next batch, which runBatch returns (nil otherwise).
func (r *Relay) runBatch(b *batch, claimNext bool) *batch {
	claim, claimStart := b.claim, b.start
	recs := claim.Records
	// The lease ends Lease after the claim; stop waiting for the broker well
	// before, so that no ack arrives for a message another relay may own.
	leaseEnd := claimStart.Add(r.cfg.Lease)
	failpoint.Inject("relay-after-claim")

	pubCtx, cancel := context.WithDeadline(r.sendCtx, claimStart.Add(r.cfg.PublishTimeout))
	slowDone := r.watchSlowPublish()
	errs := r.publish(pubCtx, recs)
	cancel()
	slowDone()
	failpoint.Inject("relay-after-ack")

	var sent, released []int64
	var sentRecs []outbox.Record
	var failures []store.Failure
	var failedRecs []outbox.Record
	var failedErrs []error
	unavailable := false
	shuttingDown := r.sendCtx.Err() != nil
	for i, rec := range recs {
		err := errs[i]
		if err == nil {
			sent = append(sent, rec.Seq)
			sentRecs = append(sentRecs, rec)
			continue
		}
		class := sink.Classify(err)
		if shuttingDown && class == sink.Unavailable {
			released = append(released, rec.Seq)
			continue
		}
		f := store.Failure{Seq: rec.Seq, Error: err.Error()}
		switch class {
		case sink.Unavailable:
			unavailable = true
			f.Delay = r.backoff.next()
		case sink.TopicUnavailable:
			// Not the message's fault, nor the whole broker's: the message
			// waits for its topic, and the relay goes on with the others.
			f.Delay = sink.TopicRetryDelay(err, time.Now())
		case sink.Permanent:
			f.CountAttempt, f.Dead = true, true
		default:
			f.CountAttempt = true
			f.Dead = rec.Attempts+1 >= r.cfg.MaxAttempts
			f.Delay = r.retryDelay(rec.Attempts + 1)
		}
		failures = append(failures, f)
		failedRecs = append(failedRecs, rec)
		failedErrs = append(failedErrs, err)
	}
	if !unavailable && len(sent) > 0 {
		r.backoff.reset()
	}

	var next *batch
	if len(sent) > 0 {
		var (
			n    int64
			err  error
			done bool
		)
		var linger time.Duration
		if claimNext && len(recs) < r.cfg.BatchSize {
			linger = r.cfg.lingerAt(r.rate.perSecond(time.Now()))
		}
		inMemory := r.marksInMemory()
		if linger > 0 && !inMemory {
			r.sleep(linger) // on stop, mark at once
		}
		if mc, ok := r.cfg.Store.(store.MarkClaimer); ok && claimNext && len(failures) == 0 && len(released) == 0 &&
			!r.isStopping() && r.backoff.remaining() <= 0 && !inMemory {
			nb := &batch{woken: r.wake.wait(), start: time.Now()}
			ctx, cancel := context.WithDeadline(context.Background(), leaseEnd)
			var c store.Claim
			n, c, err = mc.MarkSentAndClaim(ctx, claim.Token, sent, r.claimParams())
			cancel()
			if err == nil {
				done = true
				nb.claim = c
				r.claimed(c)
				next = nb
			} else {
				r.log.Warn("mark and claim failed; marking alone", slog.Any("error", err))
			}
		}
		if !done {
			n, err = r.mark(leaseEnd, func(ctx context.Context) (int64, error) {
				return r.cfg.Store.MarkSent(ctx, claim.Token, sent)
			})
		}
		if err != nil {
			r.log.Error("mark sent failed; the messages will be sent again after the lease expires",
				slog.Any("error", err), slog.Int("messages", len(sent)))
		} else {
			r.fenced(claim.Token, len(sent), n)
			if r.cfg.Hooks.Published != nil {
				now := time.Now()
				for _, rec := range sentRecs {
					r.cfg.Hooks.Published(rec, now.Sub(rec.CreatedAt))
				}
			}
		}
		if linger > 0 && inMemory {
			// The mark was in memory: linger before the next claim, not
			// before this batch's acknowledgement.
			r.sleep(linger)
		}
	}
	if len(failures) > 0 {
		n, err := r.mark(leaseEnd, func(ctx context.Context) (int64, error) {
			return r.cfg.Store.MarkFailed(ctx, claim.Token, failures)
		})
		if err != nil {
			r.log.Error("mark failed failed; the messages will be retried after the lease expires",
				slog.Any("error", err), slog.Int("messages", len(failures)))
		} else {
			r.fenced(claim.Token, len(failures), n)
		}
		for i, f := range failures {
			rec := failedRecs[i]
			attrs := []any{slog.String("message_id", rec.ID.String()), slog.String("aggregate_type", rec.AggregateType),
				slog.String("aggregate_id", rec.AggregateID), slog.String("event_type", rec.EventType),
				slog.Int("attempts", rec.Attempts+boolInt(f.CountAttempt)), slog.String("error", f.Error)}
			switch {
			case f.Dead:
				r.log.Error("message dead-lettered", attrs...)
			case f.CountAttempt:
				r.log.Warn("publish failed; retry scheduled", append(attrs, slog.Duration("retry_in", f.Delay))...)
			default:
				r.log.Debug("not the message's fault; retry scheduled without counting an attempt", append(attrs, slog.Duration("retry_in", f.Delay))...)
			}
			if r.cfg.Hooks.Failed != nil {
				r.cfg.Hooks.Failed(rec, failedErrs[i], f.Dead)
			}
		}
		if unavailable {
			r.log.Warn("broker unavailable; relay pausing", slog.Duration("pause", r.backoff.remaining()))
		}
	}
	if len(released) > 0 {
		n, err := r.mark(leaseEnd, func(ctx context.Context) (int64, error) {
			return r.cfg.Store.Release(ctx, claim.Token, released)
		})
		if err != nil {
			r.log.Error("release failed; the messages become due when the lease expires", slog.Any("error", err))
		} else {
			r.fenced(claim.Token, len(released), n)
			r.log.Info("released unsent messages on shutdown", slog.Int64("messages", n))
		}
	}
	return next
}

// publish publishes recs with the sink and returns one error per record,
// nil for those the broker acknowledged. A record that is not a message to
// publish (outbox.Record.Invalid: a row written with plain SQL whose
// headers the store could not read) is not given to the sink: its error is
// permanent, with the column and the rule, so that it becomes a dead letter
// at once with that reason while the others are published.
func (r *Relay) publish(ctx context.Context, recs []outbox.Record) []error {
	if !slices.ContainsFunc(recs, func(rec outbox.Record) bool { return rec.Invalid != nil }) {
		return r.publishValid(ctx, recs)
	}
	errs := make([]error, len(recs))
	var valid []outbox.Record
	var at []int // the index in recs of each record of valid
	for i, rec := range recs {
		if rec.Invalid != nil {
			errs[i] = fmt.Errorf("%w: relay: message %s not published: %w", sink.ErrPermanent, rec.ID, rec.Invalid)
			continue
		}
		valid = append(valid, rec)
		at = append(at, i)
	}
	if len(valid) > 0 {
		for j, err := range r.publishValid(ctx, valid) {
			errs[at[j]] = err
		}
	}
	return errs
}

// publishValid publishes recs with the sink and returns one error per
// record.
func (r *Relay) publishValid(ctx context.Context, recs []outbox.Record) []error {
	errs := r.cfg.Sink.Publish(ctx, recs)
	if len(errs) != len(recs) {
		// A sink bug; treat every record as not sent rather than guess.
		bug := fmt.Errorf("relay: sink returned %d results for %d records", len(errs), len(recs))
		r.log.Error("sink bug", slog.Any("error", bug))
		errs = make([]error, len(recs))
		for i := range errs {
			errs[i] = bug
		}
	}
	return errs
}

// marksInMemory reports whether the store records MarkSent without a round
// trip now (store.MemoryMarker). The relay then marks a batch on its own
// and claims the next one separately: combining them would save nothing,
// and the batch's Hooks.Published would wait for the next claim's round
// trip.
func (r *Relay) marksInMemory() bool {
	mm, ok := r.cfg.Store.(store.MemoryMarker)
	return ok && mm.MarksInMemory()
}

// mark runs a state change, retrying transient database errors (a killed
// connection, a failover) until shortly before the lease ends. Past that the
// message is someone else's to send, and the fence would reject the change
// anyway.
func (r *Relay) mark(leaseEnd time.Time, fn func(context.Context) (int64, error)) (int64, error) {
	wait := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithDeadline(context.Background(), leaseEnd)
		n, err := fn(ctx)
		cancel()
		if err == nil {
			return n, nil
		}
		if time.Until(leaseEnd) < wait {
			return 0, err
		}
		r.log.Warn("mark failed; retrying", slog.Any("error", err), slog.Duration("retry_in", wait))
		time.Sleep(wait)
		wait = min(2*wait, 2*time.Second)
	}
}

func (r *Relay) fenced(token uuid.UUID, want int, got int64) {
	if got >= int64(want) {
		return
	}
	lost := want - int(got)
	r.log.Warn("lease was taken over; another relay owns these messages now",
		slog.String("token", token.String()), slog.Int("messages", lost))
	if r.cfg.Hooks.Fenced != nil {
		r.cfg.Hooks.Fenced(lost)
	}
}

// retryDelay is the delay before the next attempt after `attempt` failures:
// min(RetryMax, RetryBase*2^attempt), minus a random jitter of up to half.
func (r *Relay) retryDelay(attempt int) time.Duration {
	return backoff.Delay(r.cfg.RetryBase, r.cfg.RetryMax, attempt)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// waker broadcasts wake-ups to every waiting worker.
type waker struct {
	mu sync.Mutex
	ch chan struct{}
}

func (w *waker) init() { w.ch = make(chan struct{}) }

// wait returns a channel closed by the next broadcast.
func (w *waker) wait() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ch
}

func (w *waker) broadcast() {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.ch)
	w.ch = make(chan struct{})
}

// unavailableBackoff pauses the whole relay while the broker is unreachable:
// 500ms, doubling up to max, reset by the next successful publish.
type unavailableBackoff struct {
	mu    sync.Mutex
	max   time.Duration
	cur   time.Duration
	until time.Time
}

func (b *unavailableBackoff) next() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.cur == 0:
		b.cur = min(500*time.Millisecond, b.max)
	case time.Now().After(b.until): // failing again after the last pause
		b.cur = min(2*b.cur, b.max)
	}
	b.until = time.Now().Add(b.cur)
	return b.cur
}

// remaining is how long the current pause has left: 0 when there is none
// (another worker may have reset it since this one failed).
func (b *unavailableBackoff) remaining() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(0, time.Until(b.until))
}

func (b *unavailableBackoff) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cur, b.until = 0, time.Time{}
}

// The claim rate that sets the linger (Config.LingerAbove) is measured over
// the last rateWindow, in buckets of rateBucket, and from the start of a
// busy spell while that is younger than the window (but over at least
// rateMinSpan). So a relay whose claims start finding messages at the
// writers' full rate lingers within tens of milliseconds, not after a whole
// window of claims at full speed.
const (
	rateWindow  = 250 * time.Millisecond
	rateBucket  = 10 * time.Millisecond
	rateMinSpan = 50 * time.Millisecond
)

// rateMeter measures messages claimed per second (see rateWindow). Its
// zero value is ready to use.
type rateMeter struct {
	mu     sync.Mutex
	counts [rateWindow / rateBucket]int
	sum    int
	bucket int64     // the bucket (time since since, in rateBucket) counts[bucket%len] holds
	since  time.Time // the first claim with messages after a rateWindow without
	last   time.Time // the last claim with messages
}

func (m *rateMeter) add(now time.Time, n int) {
	if n <= 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last.IsZero() || now.Sub(m.last) >= rateWindow {
		m.counts, m.sum, m.bucket, m.since = [len(m.counts)]int{}, 0, 0, now
	}
	m.roll(now)
	m.counts[m.bucket%int64(len(m.counts))] += n
	m.sum += n
	m.last = now
}

// roll moves the newest bucket up to now, emptying the buckets it passes.
func (m *rateMeter) roll(now time.Time) {
	b := int64(now.Sub(m.since) / rateBucket)
	for i := 0; m.bucket < b && i < len(m.counts); i++ {
		m.bucket++
		k := m.bucket % int64(len(m.counts))
		m.sum -= m.counts[k]
		m.counts[k] = 0
	}
	m.bucket = max(m.bucket, b)
}

func (m *rateMeter) perSecond(now time.Time) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last.IsZero() || now.Sub(m.last) >= rateWindow {
		return 0
	}
	m.roll(now)
	span := min(max(now.Sub(m.since), rateMinSpan), rateWindow)
	return float64(m.sum) / span.Seconds()
}

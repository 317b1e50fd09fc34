package relay

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outbox-dev/outbox/internal/condlog"
	"github.com/outbox-dev/outbox/internal/lifecycle"
	"github.com/outbox-dev/outbox/relay/claim"
	"github.com/outbox-dev/outbox/relay/failure"
	"github.com/outbox-dev/outbox/relay/strategy"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/store"
)

// ErrAlreadyStarted is returned by Start when the relay runs already.
var ErrAlreadyStarted = errors.New("relay: already started")

// Relay moves messages from a store to a sink. Create it with [New].
type Relay struct {
	cfg      Config
	log      *slog.Logger
	strategy strategy.Strategy // Config.Strategy, or claim.New(Config.Store)
	runs     sink.RunSink      // Config.Sink if it publishes runs, or nil

	wake     waker
	policy   failure.Policy   // what happens to a message whose publish failed
	pause    *failure.Pause   // the policy's: while the broker is unreachable, nobody claims
	report   failure.Reporter // logs decided failures, calls Hooks.Failed
	notifier store.Notifier   // the strategy's Wakeups; nil unless they are on and work
	rate     rateMeter        // messages claimed per second, for Config.LingerAbove
	// slow counts the publishes that have waited for acks longer than
	// Config.SlowPublish: while there are any, every worker claims.
	slow atomic.Int64
	// notMigrated holds while claims fail for missing tables.
	notMigrated condlog.Condition

	mu    sync.Mutex
	cause error // why a strategy stopped the relay (strategy.StopError), or nil

	run      lifecycle.Run     // Start runs once
	stopping *lifecycle.Signal // closed when Stop is called: claim no more
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
		strategy: cfg.Strategy,
		stopping: lifecycle.NewSignal(nil),
		done:     make(chan struct{}),
	}
	if r.strategy == nil {
		r.strategy = claim.New(cfg.Store)
	}
	r.runs, _ = cfg.Sink.(sink.RunSink)
	r.wake.init()
	r.pause = failure.NewPause(cfg.UnavailableBackoffMax)
	r.policy = failure.Policy{MaxAttempts: cfg.MaxAttempts, RetryBase: cfg.RetryBase, RetryMax: cfg.RetryMax, Pause: r.pause}
	r.report = failure.Reporter{Log: r.log, Failed: cfg.Hooks.Failed}
	return r, nil
}

// ID returns the relay's instance id, as stored in lease_owner.
func (r *Relay) ID() string { return r.cfg.ID }

// Start sets up the strategy's wake-ups (Strategy.Wakeups: LISTEN with
// pgstore; none with Config.DisableListen), launches the workers and
// returns. Setting up LISTEN takes a round trip, or up to pgstore.ListenProbeTimeout when its
// test notification does not arrive (a transaction pooler); the relay
// then polls. ctx bounds the whole run: when it is done the relay stops as
// if Stop had been called.
func (r *Relay) Start(ctx context.Context) error {
	return r.run.Start(ErrAlreadyStarted, func() error { return r.start(ctx) })
}

// start is Start's work, done once.
func (r *Relay) start(ctx context.Context) error {
	r.sendCtx, r.sendStop = context.WithCancel(context.WithoutCancel(ctx))

	// The listening connection lives until the workers have stopped, not
	// until ctx ends: Stop alone closes it.
	listenCtx, stopListening := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if n := r.strategy.Wakeups(); n != nil && !r.cfg.DisableListen {
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
	r.stopping.CloseOn(ctx)
	workers := sync.WaitGroup{}
	workers.Go(r.poll)
	for range r.cfg.Workers - 1 {
		workers.Go(r.help)
	}
	go func() {
		workers.Wait()
		r.sendStop()
		r.closeStrategy()
		stopListening()
		wg.Wait() // the listening connection is closed
		close(r.done)
	}()
	r.log.Info("relay started", slog.Int("workers", r.cfg.Workers), slog.Int("batch_size", r.cfg.BatchSize),
		slog.Int("max_run", r.cfg.MaxRun), slog.Duration("lease", r.cfg.Lease), slog.Duration("poll_interval", r.cfg.PollInterval))
	return nil
}

// closeTimeout bounds the strategy's Close when the relay stops.
const closeTimeout = 5 * time.Second

// closeStrategy closes the strategy once its workers made their last
// marks: a leader hands its lead over. A failure only means that another
// relay takes over when the lead's lease expires.
func (r *Relay) closeStrategy() {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	if err := r.strategy.Close(ctx); err != nil {
		r.log.Warn("closing the strategy failed; a lead it held passes on when its lease expires", slog.Any("error", err))
	}
}

// Stop stops claiming, waits up to Config.ShutdownTimeout for the acks of
// batches in flight (marking them), then cancels what is left and releases
// its leases. It returns when every worker has finished and the listening
// connection is closed: nil, or the strategy's cause when the strategy
// stopped the relay (see Err); or ctx's error if ctx ends first. Calling
// it again, or on a relay that never started, is safe.
func (r *Relay) Stop(ctx context.Context) error {
	if !r.run.Stop(r.stopping) {
		return nil
	}
	err := lifecycle.Drain(ctx, r.done, r.cfg.ShutdownTimeout, func() {
		r.log.Warn("shutdown timeout: cancelling unacknowledged publishes and releasing their leases")
		r.sendStop()
	}, r.sendStop)
	if err != nil {
		return err
	}
	r.log.Info("relay stopped")
	return r.Err()
}

// stopWith stops the relay as Stop does, with err as the cause that Err,
// Stop and Run return: a strategy's Claim returned a strategy.StopError.
func (r *Relay) stopWith(err error) {
	r.mu.Lock()
	if r.cause == nil {
		r.cause = err
		r.log.Error("the strategy stopped the relay", slog.Any("error", err))
	}
	r.mu.Unlock()
	r.stopping.Close()
}

// Err returns why the strategy stopped the relay (the Err of the
// strategy.StopError its Claim returned), or nil. It is valid once Stopped
// is closed.
func (r *Relay) Err() error {
	select {
	case <-r.done:
	default:
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cause
}

// Stopped returns a channel closed when the relay has stopped.
func (r *Relay) Stopped() <-chan struct{} { return r.done }

// Run starts the relay and blocks until ctx is done or the strategy stops
// it, then stops it gracefully. It returns nil after a clean stop, and
// the strategy's cause (see Err) when the strategy stopped it.
func (r *Relay) Run(ctx context.Context) error {
	if err := r.Start(ctx); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-r.stopping.C():
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), r.cfg.ShutdownTimeout+r.cfg.Lease)
	defer cancel()
	return r.Stop(stopCtx)
}

package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/sink/kafka"
	"github.com/outbox-dev/outbox/store"
)

// errCrashed is what a killed relay's database and broker calls return: it
// behaves as a process that no longer exists, changing nothing.
var errCrashed = errors.New("demo: relay crashed")

// crashWhen says at which point of a batch a relay is killed.
type crashWhen int32

const (
	crashNone       crashWhen = iota
	crashAfterAck             // the broker acknowledged the batch; it is not marked sent: sent again (duplicates)
	crashAfterClaim           // the batch is claimed, not published: it waits for the lease to expire
)

// crashable wraps a relay's store and sink. Once killed, every call fails
// without touching the database or the broker, so the relay's claimed
// messages stay IN_FLIGHT under its lease, exactly as after a crash of its
// process, and come back when the lease expires.
type crashable struct {
	queue outboxStore
	sink  *kafka.Sink

	armed  atomic.Int32 // a crashWhen
	dead   atomic.Bool
	killed chan struct{}
	once   sync.Once
}

func (c *crashable) kill() {
	c.once.Do(func() {
		c.dead.Store(true)
		close(c.killed)
	})
}

// Claim implements store.Queue.
func (c *crashable) Claim(ctx context.Context, p store.ClaimParams) (store.Claim, error) {
	if c.dead.Load() {
		return store.Claim{}, errCrashed
	}
	claim, err := c.queue.Claim(ctx, p)
	if err == nil && len(claim.Records) > 0 && c.armed.CompareAndSwap(int32(crashAfterClaim), int32(crashNone)) {
		c.kill()
	}
	return claim, err
}

// MarkSent implements store.Queue.
func (c *crashable) MarkSent(ctx context.Context, token uuid.UUID, seqs []int64) (int64, error) {
	if c.dead.Load() {
		return 0, errCrashed
	}
	return c.queue.MarkSent(ctx, token, seqs)
}

// MarkFailed implements store.Queue.
func (c *crashable) MarkFailed(ctx context.Context, token uuid.UUID, failures []store.Failure) (int64, error) {
	if c.dead.Load() {
		return 0, errCrashed
	}
	return c.queue.MarkFailed(ctx, token, failures)
}

// Release implements store.Queue.
func (c *crashable) Release(ctx context.Context, token uuid.UUID, seqs []int64) (int64, error) {
	if c.dead.Load() {
		return 0, errCrashed
	}
	return c.queue.Release(ctx, token, seqs)
}

// Publish implements sink.Sink.
func (c *crashable) Publish(ctx context.Context, recs []outbox.Record) []error {
	errs := make([]error, len(recs))
	if c.dead.Load() {
		for i := range errs {
			errs[i] = errCrashed
		}
		return errs
	}
	errs = c.sink.Publish(ctx, recs)
	if c.armed.CompareAndSwap(int32(crashAfterAck), int32(crashNone)) {
		c.kill()
	}
	return errs
}

// notifyingCrashable is a crashable over a store that wakes the relay on
// new messages (PostgreSQL's LISTEN/NOTIFY), so that the demo's relays wake
// at once as real ones do.
type notifyingCrashable struct {
	*crashable
	n store.Notifier
}

// Notifications implements store.Notifier.
func (c notifyingCrashable) Notifications(ctx context.Context) (<-chan struct{}, error) {
	return c.n.Notifications(ctx)
}

// Idle implements store.Notifier.
func (c notifyingCrashable) Idle(ctx context.Context, owner string, d time.Duration) error {
	if c.dead.Load() {
		return errCrashed
	}
	return c.n.Idle(ctx, owner, d)
}

// Busy implements store.Notifier.
func (c notifyingCrashable) Busy(ctx context.Context, owner string) error {
	if c.dead.Load() {
		return errCrashed
	}
	return c.n.Busy(ctx, owner)
}

// Close implements sink.Sink. The slot closes the real sink once the relay
// stopped.
func (c *crashable) Close() error { return nil }

// relaySlot runs one outbox's relay, and kills and replaces it on demand.
type relaySlot struct {
	name    string
	queue   outboxStore
	sinkCfg kafka.Config
	cfg     relay.Config
	log     *slog.Logger

	mu          sync.Mutex
	cur         *crashable
	curRelay    *relay.Relay
	incarnation int
	kills       atomic.Int64
	abandoned   sync.WaitGroup
}

// start starts a new relay (incarnation) on the slot.
func (s *relaySlot) start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sk, err := kafka.New(s.sinkCfg)
	if err != nil {
		return fmt.Errorf("demo: %s relay: %w", s.name, err)
	}
	s.incarnation++
	c := &crashable{queue: s.queue, sink: sk, killed: make(chan struct{})}
	cfg := s.cfg
	cfg.Store, cfg.Sink = c, c
	if n, ok := s.queue.(store.Notifier); ok {
		cfg.Store = notifyingCrashable{c, n}
	}
	cfg.ID = fmt.Sprintf("%s-%s-relay-%d", relayIDPrefix, s.name, s.incarnation)
	r, err := relay.New(cfg)
	if err != nil {
		sk.Close()
		return fmt.Errorf("demo: %s relay: %w", s.name, err)
	}
	if err := r.Start(context.WithoutCancel(ctx)); err != nil {
		sk.Close()
		return fmt.Errorf("demo: %s relay: %w", s.name, err)
	}
	s.cur, s.curRelay = c, r
	return nil
}

// crash kills the running relay at point when of its next batch (or at
// once if no batch comes within wait) and leaves its leases behind. The
// killed relay's goroutines are stopped in the background; nothing they do
// reaches the database or the broker any more.
func (s *relaySlot) crash(when crashWhen, wait time.Duration) crashWhen {
	s.mu.Lock()
	c, r := s.cur, s.curRelay
	s.cur, s.curRelay = nil, nil
	s.mu.Unlock()
	if c == nil {
		return crashNone
	}
	c.armed.Store(int32(when))
	select {
	case <-c.killed:
	case <-time.After(wait):
		when = crashNone // idle: killed between batches
		c.kill()
	}
	s.kills.Add(1)
	s.log.Info("demo chaos: relay killed", slog.String("relay", r.ID()))
	s.abandoned.Add(1)
	go func() {
		defer s.abandoned.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 2*s.cfg.Lease+10*time.Second)
		defer cancel()
		_ = r.Stop(ctx)
		c.sink.Close()
	}()
	return when
}

// stop stops the running relay gracefully (it releases its leases) and
// waits for the killed ones to finish.
func (s *relaySlot) stop(ctx context.Context) {
	s.mu.Lock()
	c, r := s.cur, s.curRelay
	s.cur, s.curRelay = nil, nil
	s.mu.Unlock()
	if r != nil {
		_ = r.Stop(ctx)
		c.sink.Close()
	}
	s.abandoned.Wait()
}

// running reports whether the slot has a live relay.
func (s *relaySlot) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.curRelay != nil
}

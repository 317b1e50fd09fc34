package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/outbox-dev/outbox/store"
)

// batch is the result of one claim.
type batch struct {
	claim store.Claim
	// start is when the claim was sent: the lease runs from there.
	start time.Time
	// woken was taken before the claim, so that a wake-up after it is not
	// lost when the claim found nothing.
	woken <-chan struct{}
}

// newBatch starts a claim now: the lease runs from here, and a wake-up from
// now on is not lost.
func (r *Relay) newBatch() *batch { return &batch{woken: r.wake.wait(), start: time.Now()} }

// leaseEnd is when b's lease ends.
func (r *Relay) leaseEnd(b *batch) time.Time { return b.start.Add(r.cfg.Lease) }

// claim claims a batch on its own.
func (r *Relay) claim() (*batch, error) {
	b := r.newBatch()
	ctx, cancel := context.WithTimeout(r.sendCtx, r.cfg.Lease/2)
	defer cancel()
	c, err := r.strategy.Claim(ctx, r.claimParams())
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

// claimParams are the parameters of every claim of r: its ID, BatchSize,
// Lease, MaxRun and MaxRunBytes.
func (r *Relay) claimParams() store.ClaimParams {
	return store.ClaimParams{Owner: r.cfg.ID, Limit: r.cfg.BatchSize, Lease: r.cfg.Lease,
		MaxRun: r.cfg.MaxRun, MaxRunBytes: r.cfg.MaxRunBytes}
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
	if n, ok := r.giveBack(b, seqsOf(b.claim.Records)); ok {
		r.log.Debug("released claimed messages before publishing them", slog.String("reason", why), slog.Int64("messages", n))
	}
}

// giveBack releases the messages seqs of b's claim, so that they are due
// again at once. It returns the number released, or false after logging
// why it failed: the messages then become due when the lease expires.
func (r *Relay) giveBack(b *batch, seqs []int64) (int64, bool) {
	n, err := r.mark(r.leaseEnd(b), func(ctx context.Context) (int64, error) {
		return r.strategy.Release(ctx, b.claim.Token, seqs)
	})
	if err != nil {
		r.log.Error("release failed; the messages become due when the lease expires", slog.Any("error", err))
		return 0, false
	}
	r.fenced(b.claim.Token, len(seqs), n)
	return n, true
}

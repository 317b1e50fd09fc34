package cursor

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/puddle/v2"

	"github.com/outbox-dev/outbox/internal/lifecycle"
)

// startKeeper starts the goroutine that keeps the lead the Strategy has
// just taken under cs.token: it renews the lease every third of it, on the
// pool, whatever the Strategy's caller does meanwhile (reading, idling, or
// waiting for a broker that does not answer), so that a Strategy keeps its
// lead without a relay.Relay and behind any wrapper. The goroutine ends
// with the lead: when dropLead stops it (Resign, a save or renewal that
// found the lease taken over, a lease that was not renewed in time), or
// when the pool is closed. A hung process renews nothing: a standby takes
// over once the lease ran out, and the old leader, when it resumes, finds
// its lease ended before it writes anything. cs.mu is held.
func (s *Strategy) startKeeper() {
	cs := &s.cs
	cs.stopKeeper()
	lease := cs.lease
	if lease <= 0 {
		lease = s.set.LeaderLease
	}
	ctx, cancel := context.WithCancel(context.Background())
	prev, done := cs.keepDone, make(chan struct{})
	cs.keepStop, cs.keepDone = cancel, done
	cs.claimed.Store(time.Now().UnixNano())
	tok := cs.token
	go func() {
		defer close(done)
		s.keepLead(ctx, tok, lease)
		if prev != nil {
			<-prev // keepDone stands for every keeper started so far
		}
	}()
}

// leadIdleLimit is how long a leading Strategy may get no claim before it
// gives the lead up: its relay stopped without resigning (a wrapper of the
// Strategy that does not pass Close on), or the program stopped using it.
// A running relay claims at least every PollInterval, and while the broker
// is unreachable at least every Config.UnavailableBackoffMax.
const leadIdleLimit = 2 * time.Minute

// idleLimit is leadIdleLimit, or what a test set.
func (s *Strategy) idleLimit() time.Duration {
	if s.leadIdle > 0 {
		return s.leadIdle
	}
	return leadIdleLimit
}

// keepLead renews the lead under tok every third of lease until ctx ends,
// a renewal finds the Strategy no longer leading under tok, or the
// Strategy got no claim for leadIdleLimit (it then gives the lead up, and
// a standby takes over when the lease ends).
func (s *Strategy) keepLead(ctx context.Context, tok uuid.UUID, lease time.Duration) {
	lifecycle.Every(ctx, lease/3, func() bool {
		if idle := time.Since(time.Unix(0, s.cs.claimed.Load())); idle > s.idleLimit() {
			s.giveUpIdleLead(tok, idle)
			return false
		}
		return s.renewLead(ctx, tok, lease)
	})
}

// giveUpIdleLead drops the lead under tok, which got no claim for idle.
func (s *Strategy) giveUpIdleLead(tok uuid.UUID, idle time.Duration) {
	cs := &s.cs
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if !cs.leader || cs.token != tok {
		return
	}
	s.set.Logger.Warn("cursor: no claim for a while; giving the lead up (a relay that stops calls Close)",
		slog.String("schema", s.set.Schema), slog.Duration("idle", idle.Round(time.Second)))
	cs.dropLead()
}

// renewLead renews the lease of the lead under tok once
// ([pgstore.CursorDB.Renew]), and reports whether the Strategy still leads
// under tok. A renewal that finds the lease taken over gives up the lead:
// the claims that hold cursor messages are fenced from then on. A renewal
// that fails (the database is unreachable) keeps the lead until its lease
// is about to end, when the Strategy gives it up by itself (checkLease);
// one that finds the pool closed gives it up at once.
func (s *Strategy) renewLead(ctx context.Context, tok uuid.UUID, lease time.Duration) bool {
	cs := &s.cs
	cs.mu.Lock()
	s.checkLease(time.Now())
	leading := cs.leader && cs.token == tok
	cs.mu.Unlock()
	if !leading {
		return false
	}
	rctx, cancel := context.WithTimeout(ctx, lease/3)
	defer cancel()
	sent := time.Now()
	held, err := s.db.Renew(rctx, tok, lease)

	cs.mu.Lock()
	defer cs.mu.Unlock()
	switch {
	case !cs.leader || cs.token != tok:
		return false // resigned, or lost meanwhile
	case errors.Is(err, puddle.ErrClosedPool):
		s.set.Logger.Info("cursor: the pool is closed; no longer leading the cursor", slog.String("schema", s.set.Schema))
		cs.dropLead()
		return false
	case err != nil:
		s.set.Logger.Warn("cursor: could not renew the lease; still leading until it ends",
			slog.String("schema", s.set.Schema), slog.Time("lease_until", cs.leaseUntil), slog.Any("error", err))
		return true
	case !held:
		s.set.Logger.Warn("cursor: lease taken over; no longer leading", slog.String("schema", s.set.Schema))
		cs.dropLead()
		return false
	}
	if until := sent.Add(lease); until.After(cs.leaseUntil) {
		cs.leaseUntil = until
	}
	return true
}

// waitKeeper waits until the lead's keeper that closes done (nil: none was
// started) has returned, or ctx ends.
func waitKeeper(ctx context.Context, done <-chan struct{}) {
	if done == nil {
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
}

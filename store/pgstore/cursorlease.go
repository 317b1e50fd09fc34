package pgstore

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"

	"github.com/outbox-dev/outbox/internal/lifecycle"
)

// startKeeper starts the goroutine that keeps the lead the Cursor has just
// taken under cs.token: it renews the lease every third of it, on the pool,
// whatever the Cursor's caller does meanwhile (reading, idling, or waiting
// for a broker that does not answer), so that a Cursor keeps its lead
// without a relay.Relay and behind any wrapper. The goroutine ends with
// the lead: when dropLead stops it (Resign, a save or renewal that found
// the lease taken over, a lease that was not renewed in time), or when the
// pool is closed. A hung process renews nothing: a standby takes over once
// the lease ran out, and the old leader, when it resumes, finds its lease
// ended before it writes anything. cs.mu is held.
func (c *Cursor) startKeeper() {
	cs := &c.cs
	cs.stopKeeper()
	lease := cs.lease
	if lease <= 0 {
		lease = c.s.leaderLease()
	}
	ctx, cancel := context.WithCancel(context.Background())
	prev, done := cs.keepDone, make(chan struct{})
	cs.keepStop, cs.keepDone = cancel, done
	cs.claimed.Store(time.Now().UnixNano())
	tok := cs.token
	go func() {
		defer close(done)
		c.keepLead(ctx, tok, lease)
		if prev != nil {
			<-prev // keepDone stands for every keeper started so far
		}
	}()
}

// leadIdleLimit is how long a leading Cursor may get no claim before it
// gives the lead up: its relay stopped without resigning (a wrapper of the
// Cursor that does not pass Resign on), or the program stopped using it. A
// running relay claims at least every PollInterval, and while the broker is
// unreachable at least every Config.UnavailableBackoffMax.
const leadIdleLimit = 2 * time.Minute

// idleLimit is leadIdleLimit, or what a test set.
func (c *Cursor) idleLimit() time.Duration {
	if c.leadIdle > 0 {
		return c.leadIdle
	}
	return leadIdleLimit
}

// stopKeeper tells the lead's keeper, if one runs, to stop, without waiting
// for it (keepDone is closed when it returned). cs.mu is held.
func (cs *cursorState) stopKeeper() {
	if cs.keepStop != nil {
		cs.keepStop()
		cs.keepStop = nil
	}
}

// keepLead renews the lead under tok every third of lease until ctx ends,
// a renewal finds the Cursor no longer leading under tok, or the Cursor got
// no claim for leadIdleLimit (it then gives the lead up, and a standby
// takes over when the lease ends).
func (c *Cursor) keepLead(ctx context.Context, tok uuid.UUID, lease time.Duration) {
	lifecycle.Every(ctx, lease/3, func() bool {
		if idle := time.Since(time.Unix(0, c.cs.claimed.Load())); idle > c.idleLimit() {
			c.giveUpIdleLead(tok, idle)
			return false
		}
		return c.renewLead(ctx, tok, lease)
	})
}

// giveUpIdleLead drops the lead under tok, which got no claim for idle.
func (c *Cursor) giveUpIdleLead(tok uuid.UUID, idle time.Duration) {
	cs := &c.cs
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if !cs.leader || cs.token != tok {
		return
	}
	c.s.cfg.Logger.Warn("pgstore: no claim for a while; giving the cursor lead up (a relay that stops should call Resign)",
		slog.String("schema", c.s.cfg.Schema), slog.Duration("idle", idle.Round(time.Second)))
	cs.dropLead()
}

// renewLead renews the lease of the lead under tok once
// (queries/cursor_renew.sql), and reports whether the Cursor still leads
// under tok. A renewal that finds the lease taken over gives up the lead:
// the claims that hold cursor messages are fenced from then on. A renewal
// that fails (the database is unreachable) keeps the lead until its lease
// is about to end, when the Cursor gives it up by itself (checkLease); one
// that finds the pool closed gives it up at once.
func (c *Cursor) renewLead(ctx context.Context, tok uuid.UUID, lease time.Duration) bool {
	cs := &c.cs
	cs.mu.Lock()
	c.checkLease(time.Now())
	leading := cs.leader && cs.token == tok
	cs.mu.Unlock()
	if !leading {
		return false
	}
	rctx, cancel := context.WithTimeout(ctx, lease/3)
	defer cancel()
	var tag pgconn.CommandTag
	b := c.s.relayBatch()
	b.Queue(c.s.q.cursorRenew, tok, lease.Milliseconds()).Exec(func(t pgconn.CommandTag) error { tag = t; return nil })
	sent := time.Now()
	err := c.s.pool.SendBatch(rctx, b).Close()

	cs.mu.Lock()
	defer cs.mu.Unlock()
	switch {
	case !cs.leader || cs.token != tok:
		return false // resigned, or lost meanwhile
	case errors.Is(err, puddle.ErrClosedPool):
		c.s.cfg.Logger.Info("pgstore: the pool is closed; no longer leading the cursor", slog.String("schema", c.s.cfg.Schema))
		cs.dropLead()
		return false
	case err != nil:
		c.s.cfg.Logger.Warn("pgstore: could not renew the cursor lease; still leading until it ends",
			slog.String("schema", c.s.cfg.Schema), slog.Time("lease_until", cs.leaseUntil), slog.Any("error", err))
		return true
	case tag.RowsAffected() == 0:
		c.s.cfg.Logger.Warn("pgstore: cursor lease taken over; no longer leading", slog.String("schema", c.s.cfg.Schema))
		cs.dropLead()
		return false
	}
	if until := sent.Add(lease); until.After(cs.leaseUntil) {
		cs.leaseUntil = until
	}
	return true
}

package pgstore

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-dev/outbox/internal/lifecycle"
)

// KeepLease implements [store.LeaseKeeper]: while the store leads the
// cursor, it renews the lead's lease every third of Config.LeaderLease,
// whatever the relay does meanwhile (reading, idling, or waiting for a
// broker that does not answer), until ctx is done. A renewal that finds the
// lease taken over gives up the lead: the claims that hold cursor messages
// are fenced from then on. A renewal that fails (the database is
// unreachable) keeps the lead until its lease is about to end, when the
// store gives it up by itself (checkLease). In claim mode, or on a standby,
// it only waits.
//
// A hung process renews nothing: a standby takes over once the lease ran
// out, and the old leader, when it resumes, finds its lease ended before
// it writes anything.
func (s *Store) KeepLease(ctx context.Context) {
	lifecycle.Every(ctx, s.leaderLease()/3, func() bool {
		s.renewLead(ctx)
		return true
	})
}

// renewLead renews the lead's lease once (queries/cursor_renew.sql), if
// the store leads.
func (s *Store) renewLead(ctx context.Context) {
	cs := &s.cursor
	cs.mu.Lock()
	cs.checkLease(s, time.Now())
	leading, tok, lease := cs.leader, cs.token, cs.lease
	cs.mu.Unlock()
	if !leading {
		return
	}
	if lease <= 0 {
		lease = s.leaderLease()
	}
	rctx, cancel := context.WithTimeout(ctx, lease/3)
	defer cancel()
	var tag pgconn.CommandTag
	b := s.relayBatch()
	b.Queue(s.q.cursorRenew, tok, lease.Milliseconds()).Exec(func(t pgconn.CommandTag) error { tag = t; return nil })
	sent := time.Now()
	err := s.pool.SendBatch(rctx, b).Close()

	cs.mu.Lock()
	defer cs.mu.Unlock()
	switch {
	case !cs.leader || cs.token != tok:
		// Resigned, or lost meanwhile.
	case err != nil:
		if ctx.Err() == nil {
			s.cfg.Logger.Warn("pgstore: could not renew the cursor lease; still leading until it ends",
				slog.String("schema", s.cfg.Schema), slog.Time("lease_until", cs.leaseUntil), slog.Any("error", err))
		}
	case tag.RowsAffected() == 0:
		s.cfg.Logger.Warn("pgstore: cursor lease taken over; no longer leading", slog.String("schema", s.cfg.Schema))
		cs.dropLead()
	default:
		if until := sent.Add(lease); until.After(cs.leaseUntil) {
			cs.leaseUntil = until
		}
	}
}

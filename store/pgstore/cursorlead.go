package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-dev/outbox/store"
)

// checkLease gives up the lead if nothing renewed its lease in time:
// another relay may lead by now (a tenth of the lease before it ends, so
// that the database, which counts from a later moment, has not let anyone
// take over yet). cs.mu is held.
func (cs *cursorState) checkLease(s *Store, now time.Time) {
	if cs.leader && now.After(cs.leaseUntil.Add(-cs.lease/10)) {
		s.cfg.Logger.Warn("pgstore: cursor lease not renewed in time; no longer leading", slog.String("schema", s.cfg.Schema))
		cs.dropLead()
	}
}

// dropLead forgets the lead and everything in the window: claims that hold
// cursor messages are fenced from now on (their marks change nothing), and
// the lease is no longer renewed. cs.mu is held.
func (cs *cursorState) dropLead() {
	cs.stopKeeper()
	cs.leader = false
	cs.token = uuid.Nil
	cs.win = nil
	cs.checkedAt = time.Time{}
}

// Resign implements [store.Resigner]: a leader saves its position and gives
// up its lease, so that a standby leads at once. Messages it still holds
// unacknowledged are read again by the next leader. In claim mode, or on a
// standby, it does nothing. It returns once the goroutine that renewed the
// lead's lease has ended (or ctx ends): a Store that leads renews its lease
// until Resign, the loss of the lead, or the closing of its pool, so call
// it when you stop using a Store in cursor mode.
func (s *Store) Resign(ctx context.Context) error {
	cs := &s.cursor
	cs.db.Lock()
	defer cs.db.Unlock()
	cs.mu.Lock()
	leading, keeper := cs.leader, cs.keepDone
	var (
		tok  uuid.UUID
		save cursorSaveArgs
	)
	if leading {
		tok, save = cs.token, cs.win.saveArgs()
		cs.dropLead()
	}
	cs.mu.Unlock()
	defer waitKeeper(ctx, keeper)
	if !leading {
		return nil
	}
	b := s.relayBatch()
	b.Queue(s.q.cursorResign, tok, save.pos, save.head, save.lo, save.hi)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("pgstore: resign the cursor: %w", err)
	}
	s.cfg.Logger.Info("pgstore: resigned the cursor", slog.String("schema", s.cfg.Schema), slog.Int64("position", save.pos))
	return nil
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

// MarksInMemory implements [store.MemoryMarker]: true while the store leads
// the cursor, whose MarkSent of cursor messages is answered from memory.
func (s *Store) MarksInMemory() bool {
	leading, _ := s.Leading()
	return leading
}

// Leading reports whether this store leads the outbox's cursor (cursor
// mode), and the position it has reached: every QUEUED message at or below
// it is published or in the table path.
func (s *Store) Leading() (bool, int64) {
	cs := &s.cursor
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.checkLease(s, time.Now())
	if !cs.leader {
		return false, 0
	}
	return true, cs.win.pos
}

// detectMode reads whether the outbox is in cursor mode, once, before the
// store's first claim or mark. An outbox whose migrations predate cursor
// mode is in claim mode. Before a claim (p not nil) it also tries to lead,
// in the same round trip, so that a new relay's first claim is one round
// trip shorter.
func (s *Store) detectMode(ctx context.Context, p *store.ClaimParams) (mode, error) {
	cs := &s.cursor
	cs.mu.Lock()
	m := cs.mode
	cs.mu.Unlock()
	if m != modeUnknown {
		return m, nil // claims in claim mode check again now and then
	}
	cs.db.Lock()
	defer cs.db.Unlock()
	var (
		active bool
		won    leadResult
		try    = p != nil && p.Limit >= 1 && p.Lease >= time.Millisecond
		token  = uuid.New()
		lease  time.Duration
	)
	b := s.relayBatch()
	if try {
		lease = s.leaderLease()
		b.Queue(s.q.cursorState, p.Owner, token, lease.Milliseconds(), true).QueryRow(func(row pgx.Row) error {
			return won.scan(row, &active)
		})
	} else {
		b.Queue(s.q.cursorMode).QueryRow(func(row pgx.Row) error { return row.Scan(&active) })
	}
	sent := time.Now()
	err := s.pool.SendBatch(ctx, b).Close()
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42P01": // undefined_table: before migration 010
		active = false
	case errors.As(err, &pgErr) && pgErr.Code == "42703": // undefined_column: before migration 011
		if err := s.pool.QueryRow(ctx, s.q.cursorMode).Scan(&active); err != nil {
			return modeUnknown, fmt.Errorf("read the relay mode: %w", err)
		}
		if active {
			return modeUnknown, fmt.Errorf("read the relay mode: %w: %s.outbox_cursor is older than migration 011; run Migrate ('outbox migrate')",
				ErrCursorMode, s.cfg.Schema)
		}
	case err != nil:
		return modeUnknown, fmt.Errorf("read the relay mode: %w", err)
	}
	if active {
		s.warnUnmigrated(ctx)
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.mode != modeUnknown {
		return cs.mode, nil
	}
	cs.checkedAt = time.Now()
	if !active {
		cs.mode = modeClaim
		return cs.mode, nil
	}
	s.cfg.Logger.Info("pgstore: the outbox is in cursor mode", slog.String("schema", s.cfg.Schema))
	cs.mode = modeCursor
	if try {
		cs.lease = lease
		if cs.owner == "" {
			cs.owner = p.Owner
		}
	}
	if won.pos != nil {
		cs.takeLead(s, p.Owner, token, won, sent)
	} else {
		cs.checkedAt = time.Time{} // a standby tries to lead at its first claim
	}
	return cs.mode, nil
}

// warnUnmigrated logs a warning when the outbox, in cursor mode, lacks
// migration 012 (an outbox put in cursor mode by an older binary, whose
// relays now run a newer one before 'outbox migrate'): the relay runs, but
// a writer that inserts with its own SQL can lose a message. Once per mode
// detection, so once per Store in cursor mode.
func (s *Store) warnUnmigrated(ctx context.Context) {
	var missing int
	if err := s.pool.QueryRow(ctx, s.q.cursorMigrated).Scan(&missing); err != nil {
		s.cfg.Logger.Warn("pgstore: could not check the outbox's migrations for cursor mode", slog.String("schema", s.cfg.Schema), slog.Any("error", err))
		return
	}
	if missing == 12 {
		s.cfg.Logger.Warn("pgstore: the outbox is in cursor mode without migration 012: a transaction that inserts into outbox_messages with its own SQL, not Enqueue, can lose its message; run Migrate ('outbox migrate')",
			slog.String("schema", s.cfg.Schema))
	}
}

// leadResult is what an attempt to lead returned (queries/cursor_state.sql):
// the position to start from (nil: another relay leads), and what the last
// leader saved as handled above it.
type leadResult struct {
	pos, head *int64
	lo, hi    []int64
}

func (r *leadResult) scan(row pgx.Row, active *bool) error {
	return row.Scan(active, &r.pos, &r.head, &r.lo, &r.hi)
}

// takeLead makes the store the leader under token from what it won at
// sent, and starts renewing the lead's lease (startKeeper). cs.mu is held.
func (cs *cursorState) takeLead(s *Store, owner string, token uuid.UUID, won leadResult, sent time.Time) {
	cs.leader, cs.token = true, token
	cs.win = newCursorWindow(*won.pos, cursorGapGrace)
	if won.head != nil {
		// What the predecessor handled above its position is not published
		// again.
		cs.win.restore(*won.head, won.lo, won.hi, sent)
	}
	cs.saved, cs.savedAt, cs.leaseUntil, cs.savedHandled = *won.pos, sent, sent.Add(cs.lease), 0
	cs.startKeeper(s)
	s.cfg.Logger.Info("pgstore: leading the cursor", slog.String("schema", s.cfg.Schema),
		slog.String("owner", owner), slog.Int64("position", *won.pos),
		slog.Int64("handled_up_to", cs.win.head), slog.Int("unhandled_ranges", len(cs.win.gaps)))
}

// standbyInterval is how often a standby tries to lead: as often as the
// full claim, so that a relay that resigned is followed within about that,
// and at least five times per leader's lease, so that a hung leader is
// followed within about its lease.
func (s *Store) standbyInterval() time.Duration {
	return min(max(s.fullClaimInterval(), 100*time.Millisecond), s.leaderLease()/5)
}

// inCursorMode reports whether the store follows cursor mode.
func (cs *cursorState) inCursorMode() bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.mode == modeCursor
}

// standby reports whether the store is in cursor mode without leading.
func (cs *cursorState) standby() bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.mode == modeCursor && !cs.leader
}

// claimModeCheckDue reports whether a claim in claim mode should check the
// mode again, and if so counts the check as made.
func (cs *cursorState) claimModeCheckDue() bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.mode != modeClaim || time.Since(cs.checkedAt) < modeCheckInterval {
		return false
	}
	cs.checkedAt = time.Now()
	return true
}

// claimModeChecked takes the result of such a check.
func (cs *cursorState) claimModeChecked(active bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if active && cs.mode == modeClaim {
		cs.mode = modeCursor
		cs.checkedAt = time.Time{}
	}
}

// applyLeadAttempt takes the result of a standby's attempt to lead under
// token: claim mode when cursor mode is off, the lead when it won. It
// reports whether it won. cs.mu is held.
func (cs *cursorState) applyLeadAttempt(s *Store, token uuid.UUID, owner string, r *cursorReply) bool {
	switch {
	case !r.active:
		cs.mode = modeClaim // cursor mode was turned off (or never on)
		cs.checkedAt = r.sent
	case r.lead.pos != nil:
		cs.takeLead(s, owner, token, r.lead, r.sent)
		return true
	}
	return false
}

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
func (c *Cursor) checkLease(now time.Time) {
	cs := &c.cs
	if cs.leader && now.After(cs.leaseUntil.Add(-cs.lease/10)) {
		c.s.cfg.Logger.Warn("pgstore: cursor lease not renewed in time; no longer leading", slog.String("schema", c.s.cfg.Schema))
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

// Resign ends the Cursor's lead: a leader saves its position and gives
// up its lease, so that a standby leads at once. Messages it still holds
// unacknowledged are read again by the next leader. On a standby, or in
// claim mode, it does nothing. It returns once the goroutine that renewed
// the lead's lease has ended (or ctx ends): a Cursor that leads renews its
// lease until Resign, the loss of the lead, or the closing of its pool, so
// call it when you stop using the Cursor, after its last mark. A failure
// only means that a standby takes over when the lease ends.
func (c *Cursor) Resign(ctx context.Context) error {
	cs := &c.cs
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
	b := c.s.relayBatch()
	b.Queue(c.s.q.cursorResign, tok, save.pos, save.head, save.lo, save.hi)
	if err := c.s.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("pgstore: resign the cursor: %w", err)
	}
	c.s.cfg.Logger.Info("pgstore: resigned the cursor", slog.String("schema", c.s.cfg.Schema), slog.Int64("position", save.pos))
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

// MarksInMemory reports whether the Cursor leads, whose MarkSent of
// cursor messages is answered from memory. A relay then marks a published
// batch on its own and claims the next one separately: combining them
// would save no round trip, and the batch's acknowledgement would wait for
// the next claim.
func (c *Cursor) MarksInMemory() bool {
	leading, _ := c.Leading()
	return leading
}

// Leading reports whether this Cursor leads the outbox's cursor, and the
// position it has reached: every QUEUED message at or below it is
// published or in the table path.
func (c *Cursor) Leading() (bool, int64) {
	cs := &c.cs
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c.checkLease(time.Now())
	if !cs.leader {
		return false, 0
	}
	return true, cs.win.pos
}

// detectMode returns the outbox's mode as the Cursor knows it: it reads
// it before the Cursor's first claim, and again at a claim once it has
// known claim mode for modeCheckInterval (in cursor mode a standby's
// attempts to lead read it). An outbox whose migrations predate cursor
// mode is in claim mode. Before a claim (p not nil) it also tries to lead,
// in the same round trip, so that a new relay's first claim is one round
// trip shorter.
func (c *Cursor) detectMode(ctx context.Context, p *store.ClaimParams) (mode, error) {
	cs := &c.cs
	if m, ok := cs.knownMode(); ok {
		return m, nil
	}
	cs.db.Lock()
	defer cs.db.Unlock()
	if m, ok := cs.knownMode(); ok {
		return m, nil // another claim read it meanwhile
	}
	r, err := c.readMode(ctx, p)
	if err != nil {
		return modeUnknown, err
	}
	if r.active {
		c.s.warnUnmigrated(ctx)
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.checkedAt = time.Now()
	if !r.active {
		cs.mode = modeClaim
		return cs.mode, nil
	}
	c.s.cfg.Logger.Info("pgstore: the outbox is in cursor mode", slog.String("schema", c.s.cfg.Schema))
	cs.mode = modeCursor
	if r.tried {
		cs.lease = r.lease
		if cs.owner == "" {
			cs.owner = p.Owner
		}
	}
	if r.won.pos != nil {
		c.takeLead(p.Owner, r.token, r.won, r.sent)
	} else {
		cs.checkedAt = time.Time{} // a standby tries to lead at its first claim
	}
	return cs.mode, nil
}

// knownMode returns the mode the Cursor knows, unless it should read it
// again (see detectMode).
func (cs *cursorState) knownMode() (mode, bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	switch cs.mode {
	case modeCursor:
		return cs.mode, true
	case modeClaim:
		return cs.mode, time.Since(cs.checkedAt) < modeCheckInterval
	}
	return modeUnknown, false
}

// modeRead is what readMode found.
type modeRead struct {
	active bool       // the outbox is in cursor mode
	tried  bool       // an attempt to lead under token, with lease, was made
	won    leadResult // its result
	token  uuid.UUID
	lease  time.Duration
	sent   time.Time // when it was sent
}

// readMode reads whether the outbox is in cursor mode and, before a claim
// (p not nil), tries to lead in the same round trip. cs.db is held.
func (c *Cursor) readMode(ctx context.Context, p *store.ClaimParams) (modeRead, error) {
	r := modeRead{tried: p != nil && p.Limit >= 1 && p.Lease >= time.Millisecond, token: uuid.New()}
	b := c.s.relayBatch()
	if r.tried {
		r.lease = c.s.leaderLease()
		b.Queue(c.s.q.cursorState, p.Owner, r.token, r.lease.Milliseconds(), true).QueryRow(func(row pgx.Row) error {
			return r.won.scan(row, &r.active)
		})
	} else {
		b.Queue(c.s.q.cursorMode).QueryRow(func(row pgx.Row) error { return row.Scan(&r.active) })
	}
	r.sent = time.Now()
	err := c.s.pool.SendBatch(ctx, b).Close()
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42P01": // undefined_table: before migration 010
		r.active = false
	case errors.As(err, &pgErr) && pgErr.Code == "42703": // undefined_column: before migration 011
		if err := c.s.pool.QueryRow(ctx, c.s.q.cursorMode).Scan(&r.active); err != nil {
			return r, fmt.Errorf("read the relay mode: %w", err)
		}
		if r.active {
			return r, fmt.Errorf("read the relay mode: %w: %s.outbox_cursor is older than migration 011; run Migrate ('outbox migrate')",
				ErrCursorMode, c.s.cfg.Schema)
		}
	case err != nil:
		return r, fmt.Errorf("read the relay mode: %w", err)
	}
	return r, nil
}

// warnUnmigrated logs a warning when the outbox, in cursor mode, lacks
// migration 012 (an outbox put in cursor mode by an older binary, whose
// relays now run a newer one before 'outbox migrate'): the relay runs, but
// a writer that inserts with its own SQL can lose a message. Once per mode
// detection, so about once per Cursor.
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

// takeLead makes the Cursor the leader under token from what it won at
// sent, and starts renewing the lead's lease (startKeeper). cs.mu is held.
func (c *Cursor) takeLead(owner string, token uuid.UUID, won leadResult, sent time.Time) {
	cs := &c.cs
	cs.leader, cs.token = true, token
	cs.win = newCursorWindow(*won.pos, cursorGapGrace)
	if won.head != nil {
		// What the predecessor handled above its position is not published
		// again.
		cs.win.restore(*won.head, won.lo, won.hi, sent)
	}
	cs.saved, cs.savedAt, cs.leaseUntil, cs.savedHandled = *won.pos, sent, sent.Add(cs.lease), 0
	c.startKeeper()
	c.s.cfg.Logger.Info("pgstore: leading the cursor", slog.String("schema", c.s.cfg.Schema),
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

// standby reports whether the Cursor is in cursor mode without leading.
func (cs *cursorState) standby() bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.mode == modeCursor && !cs.leader
}

// applyLeadAttempt takes the result of a standby's attempt to lead under
// token: claim mode when cursor mode is off, the lead when it won. It
// reports whether it won. cs.mu is held.
func (c *Cursor) applyLeadAttempt(token uuid.UUID, owner string, r *cursorReply) bool {
	cs := &c.cs
	switch {
	case !r.active:
		cs.mode = modeClaim // cursor mode was turned off (or never on)
		cs.checkedAt = r.sent
	case r.lead.pos != nil:
		c.takeLead(owner, token, r.lead, r.sent)
		return true
	}
	return false
}

package cursor

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// checkLease gives up the lead if nothing renewed its lease in time:
// another relay may lead by now (a tenth of the lease before it ends, so
// that the database, which counts from a later moment, has not let anyone
// take over yet). cs.mu is held.
func (s *Strategy) checkLease(now time.Time) {
	cs := &s.cs
	if cs.leader && now.After(cs.leaseUntil.Add(-cs.lease/10)) {
		s.set.Logger.Warn("cursor: lease not renewed in time; no longer leading", slog.String("schema", s.set.Schema))
		cs.dropLead()
	}
}

// Resign ends the Strategy's lead: a leader saves its position and gives
// up its lease, so that a standby leads at once. Messages it still holds
// unacknowledged are read again by the next leader. On a standby, or in
// claim mode, it does nothing. It returns once the goroutine that renewed
// the lead's lease has ended (or ctx ends). Call it (or Close) when you
// stop using the Strategy, after its last mark. A failure only means that
// a standby takes over when the lease ends.
func (s *Strategy) Resign(ctx context.Context) error {
	cs := &s.cs
	cs.db.Lock()
	defer cs.db.Unlock()
	cs.mu.Lock()
	leading, keeper := cs.leader, cs.keepDone
	var (
		tok  uuid.UUID
		save saveArgs
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
	if err := s.db.Resign(ctx, tok, save.CursorSave); err != nil {
		return fmt.Errorf("cursor: resign: %w", err)
	}
	s.set.Logger.Info("cursor: resigned the lead", slog.String("schema", s.set.Schema), slog.Int64("position", save.Pos))
	return nil
}

// MarksInMemory reports whether the Strategy leads, whose marks of cursor
// messages are answered from memory. A relay then marks a published batch
// on its own and claims the next one separately: combining them would save
// no round trip, and the batch's acknowledgement would wait for the next
// claim.
func (s *Strategy) MarksInMemory() bool {
	leading, _ := s.Leading()
	return leading
}

// Leading reports whether this Strategy leads the outbox's cursor, and the
// position it has reached: every QUEUED message at or below it is
// published or in the table path.
func (s *Strategy) Leading() (bool, int64) {
	cs := &s.cs
	cs.mu.Lock()
	defer cs.mu.Unlock()
	s.checkLease(time.Now())
	if !cs.leader {
		return false, 0
	}
	return true, cs.win.pos
}

// detectMode returns the outbox's mode as the Strategy knows it: it reads
// it before the Strategy's first claim, and again at a claim once it has
// known claim mode for the settings' ModeCheckInterval (in cursor mode a
// standby's attempts to lead read it). Before a claim it also tries to
// lead, in the same round trip, so that a new relay's first claim is one
// round trip shorter.
func (s *Strategy) detectMode(ctx context.Context, p *store.ClaimParams) (mode, error) {
	cs := &s.cs
	if m, ok := cs.knownMode(s.set.ModeCheckInterval); ok {
		return m, nil
	}
	cs.db.Lock()
	defer cs.db.Unlock()
	if m, ok := cs.knownMode(s.set.ModeCheckInterval); ok {
		return m, nil // another claim read it meanwhile
	}
	var attempt *pgstore.CursorLeadAttempt
	if p.Limit >= 1 && p.Lease >= time.Millisecond {
		attempt = &pgstore.CursorLeadAttempt{Owner: p.Owner, Token: uuid.New(), Lease: s.set.LeaderLease}
	}
	r, err := s.db.ReadMode(ctx, attempt)
	if err != nil {
		return modeUnknown, err
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.checkedAt = time.Now()
	if !r.Active {
		cs.mode = modeClaim
		return cs.mode, nil
	}
	s.set.Logger.Info("cursor: the outbox is in cursor mode", slog.String("schema", s.set.Schema))
	cs.mode = modeCursor
	if attempt != nil {
		cs.lease = attempt.Lease
		if cs.owner == "" {
			cs.owner = p.Owner
		}
	}
	if r.Lead.Pos != nil {
		s.takeLead(p.Owner, attempt.Token, r.Lead, r.Sent)
	} else {
		cs.checkedAt = time.Time{} // a standby tries to lead at its first claim
	}
	return cs.mode, nil
}

// takeLead makes the Strategy the leader under token from what it won at
// sent, and starts renewing the lead's lease (startKeeper). cs.mu is held.
func (s *Strategy) takeLead(owner string, token uuid.UUID, won pgstore.CursorLead, sent time.Time) {
	cs := &s.cs
	cs.leader, cs.token = true, token
	cs.win = newCursorWindow(*won.Pos, cursorGapGrace)
	if won.Head != nil {
		// What the predecessor handled above its position is not published
		// again.
		cs.win.restore(*won.Head, won.Lo, won.Hi, sent)
	}
	cs.saved, cs.savedAt, cs.leaseUntil, cs.savedHandled = *won.Pos, sent, sent.Add(cs.lease), 0
	s.startKeeper()
	s.set.Logger.Info("cursor: leading the cursor", slog.String("schema", s.set.Schema),
		slog.String("owner", owner), slog.Int64("position", *won.Pos),
		slog.Int64("handled_up_to", cs.win.head), slog.Int("unhandled_ranges", len(cs.win.gaps)))
}

// standbyInterval is how often a standby tries to lead: as often as the
// full claim, so that a relay that resigned is followed within about that,
// and at least five times per leader's lease, so that a hung leader is
// followed within about its lease.
func (s *Strategy) standbyInterval() time.Duration {
	return min(max(s.set.FullClaimInterval, 100*time.Millisecond), s.set.LeaderLease/5)
}

// applyLeadAttempt takes the answer to a standby's attempt to lead under
// token, sent at sent: claim mode when cursor mode is off, the lead when
// it won. It reports whether it won. cs.mu is held.
func (s *Strategy) applyLeadAttempt(token uuid.UUID, owner string, lead pgstore.CursorLead, sent time.Time) bool {
	cs := &s.cs
	switch {
	case !lead.Active:
		cs.mode = modeClaim // cursor mode was turned off (or never on)
		cs.checkedAt = sent
	case lead.Pos != nil:
		s.takeLead(owner, token, lead, sent)
		return true
	}
	return false
}

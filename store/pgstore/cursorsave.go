package pgstore

import (
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-dev/outbox/internal/failpoint"
)

// cursorSaveArgs is what a save writes (queries/cursor_save.sql): the
// position, and the head and unhandled ranges (head nil: too many ranges,
// keep what was saved).
type cursorSaveArgs struct {
	pos     int64
	head    *int64
	lo, hi  []int64
	handled uint64 // the window's handled count then
}

// saveArgs returns what a save of the window writes now.
func (w *cursorWindow) saveArgs() cursorSaveArgs {
	a := cursorSaveArgs{pos: w.pos, handled: w.handled}
	if head, lo, hi, ok := w.unhandled(maxSavedRanges); ok {
		a.head, a.lo, a.hi = &head, lo, hi
	}
	return a
}

// planSave plans the leader's save of its position, which also renews its
// lease. A save is due when records of the window move to the table path,
// when less than two thirds of the lease remain, or when the position
// moved or anything was handled since the last save and
// Config.CursorSaveInterval has passed since it (a negative interval: at
// once). cs.mu is held.
func (s *Store) planSave(plan *cursorPlan, now time.Time) {
	cs := &s.cursor
	plan.tabling = cs.win.tablingSeqs()
	plan.save = len(plan.tabling) > 0 || cs.leaseUntil.Sub(now) < cs.lease*2/3 ||
		((cs.win.pos > cs.saved || cs.win.handled != cs.savedHandled) &&
			(s.cursorSaveInterval() < 0 || now.Sub(cs.savedAt) >= s.cursorSaveInterval()))
	if plan.save {
		plan.saveArgs = cs.win.saveArgs()
	}
}

// queueCursorSave queues the leader's save (queries/cursor_save.sql) under
// its lease token, and with the save's failpoint armed a pause after it,
// before the round trip commits.
func (s *Store) queueCursorSave(b *pgx.Batch, plan *cursorPlan, r *cursorReply) {
	save := plan.saveArgs
	b.Queue(s.q.cursorSave, plan.leaderTok, save.pos, s.cursor.lease.Milliseconds(), save.head, save.lo, save.hi).
		Exec(func(t pgconn.CommandTag) error { r.saveTag = t; return nil })
	r.pauseSave = failpoint.Enabled && failpoint.Armed(cursorSaveFailpoint)
	if r.pauseSave {
		b.Queue(s.q.failpointWatch)
		b.Queue(s.q.failpointPause)
	}
}

// applySave takes the result of a committed save: the saved position and
// the renewed lease, or, when the save changed no row because another
// relay took the lease over, the end of the lead. It reports whether the
// store still leads. cs.mu is held.
func (s *Store) applySave(plan *cursorPlan, r *cursorReply) bool {
	cs := &s.cursor
	if r.saveTag.RowsAffected() == 0 {
		s.cfg.Logger.Warn("pgstore: cursor lease taken over; no longer leading", slog.String("schema", s.cfg.Schema))
		cs.dropLead()
		return false
	}
	cs.saved = max(cs.saved, plan.saveArgs.pos)
	cs.savedAt = r.sent
	cs.savedHandled = plan.saveArgs.handled
	cs.leaseUntil = r.sent.Add(cs.lease)
	return true
}

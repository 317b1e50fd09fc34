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
func (c *Cursor) planSave(plan *cursorPlan, now time.Time) {
	cs := &c.cs
	plan.tabling = cs.win.tablingSeqs()
	plan.save = len(plan.tabling) > 0 || cs.leaseUntil.Sub(now) < cs.lease*2/3 ||
		((cs.win.pos > cs.saved || cs.win.handled != cs.savedHandled) &&
			(c.s.cursorSaveInterval() < 0 || now.Sub(cs.savedAt) >= c.s.cursorSaveInterval()))
	if plan.save {
		plan.saveArgs = cs.win.saveArgs()
	}
}

// queueCursorSave queues the leader's save (queries/cursor_save.sql) under
// its lease token, and with the save's failpoint armed a pause after it,
// before the round trip commits.
func (c *Cursor) queueCursorSave(b *pgx.Batch, plan *cursorPlan, r *cursorReply) {
	save := plan.saveArgs
	b.Queue(c.s.q.cursorSave, plan.leaderTok, save.pos, c.cs.lease.Milliseconds(), save.head, save.lo, save.hi).
		Exec(func(t pgconn.CommandTag) error { r.saveTag = t; return nil })
	r.pauseSave = failpoint.Enabled && failpoint.Armed(cursorSaveFailpoint)
	if r.pauseSave {
		b.Queue(c.s.q.failpointWatch)
		b.Queue(c.s.q.failpointPause)
	}
}

// applySave takes the result of a committed save: the saved position and
// the renewed lease, or, when the save changed no row because another
// relay took the lease over, the end of the lead. It reports whether the
// Cursor still leads. cs.mu is held.
func (c *Cursor) applySave(plan *cursorPlan, r *cursorReply) bool {
	cs := &c.cs
	if r.saveTag.RowsAffected() == 0 {
		c.s.cfg.Logger.Warn("pgstore: cursor lease taken over; no longer leading", slog.String("schema", c.s.cfg.Schema))
		cs.dropLead()
		return false
	}
	cs.saved = max(cs.saved, plan.saveArgs.pos)
	cs.savedAt = r.sent
	cs.savedHandled = plan.saveArgs.handled
	cs.leaseUntil = r.sent.Add(cs.lease)
	return true
}

package pgstore

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ackLeading acknowledges seqs under token in the window, if the Cursor
// still leads under leaderTok, and returns how many. cs.mu is held.
func (cs *cursorState) ackLeading(leaderTok, token uuid.UUID, seqs []int64) int64 {
	if len(seqs) == 0 || !cs.leader || cs.token != leaderTok {
		return 0
	}
	return cs.win.ack(token, seqs)
}

// cursorMarkFailed is Cursor.MarkFailed: failures of cursor
// messages move them (and the later messages of their aggregates) to the
// table path; failures of table-path messages are recorded as in claim
// mode. One round trip.
func (c *Cursor) cursorMarkFailed(ctx context.Context, token uuid.UUID, f failureArgs) (int64, error) {
	cs := &c.cs
	cs.db.Lock()
	defer cs.db.Unlock()

	cs.mu.Lock()
	var (
		mine, behind []int64
		leaderTok    = cs.token
		save         cursorSaveArgs
	)
	if cs.leader {
		mine, behind = cs.win.failing(token, f.seqs)
		save = cs.win.saveArgs()
	}
	table := cs.holdsTable(token)
	cs.mu.Unlock()
	for i, seq := range f.seqs {
		f.queued[i] = containsInt64(mine, seq)
	}
	if len(mine) == 0 && !table {
		return 0, nil
	}

	var saveTag pgconn.CommandTag
	b := c.s.relayBatch()
	if len(mine) > 0 {
		// Fences the cursor's writes below (the row stays locked until the
		// round trip commits).
		b.Queue(c.s.q.cursorSave, leaderTok, save.pos, cs.lease.Milliseconds(), save.head, save.lo, save.hi).
			Exec(func(t pgconn.CommandTag) error { saveTag = t; return nil })
	}
	var changed int64
	b.Queue(c.s.q.markFailed, token, f.seqs, f.errs, f.delays, f.counts, f.deads, f.queued, nullToken(leaderTok, len(mine) > 0)).
		QueryRow(func(row pgx.Row) error { return row.Scan(&changed) })
	if len(behind) > 0 {
		b.Queue(c.s.q.cursorTable, leaderTok, behind)
	}
	sent := time.Now()
	if err := c.s.pool.SendBatch(ctx, b).Close(); err != nil {
		return 0, err
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if len(mine) > 0 {
		if saveTag.RowsAffected() == 0 {
			cs.dropLead()
			return changed, nil
		}
		cs.saved, cs.savedAt, cs.leaseUntil = max(cs.saved, save.pos), sent, sent.Add(cs.lease)
		cs.savedHandled = save.handled
		if cs.leader && cs.token == leaderTok {
			cs.win.failed(token, mine, behind)
		}
	}
	// The failed messages are the table path's now, maybe due at once.
	cs.tableMore = true
	return changed, nil
}

// cursorRelease is Cursor.Release: cursor messages go back to the
// leader's window, table-path ones to the table.
func (c *Cursor) cursorRelease(ctx context.Context, token uuid.UUID, seqs []int64) (int64, error) {
	cs := &c.cs
	cs.mu.Lock()
	var n int64
	if cs.leader {
		n = cs.win.release(token, seqs)
	}
	table := cs.holdsTable(token)
	cs.mu.Unlock()
	if !table {
		return n, nil
	}
	m, err := c.s.releaseTable(ctx, token, seqs)
	cs.mu.Lock()
	cs.tableMore = true // due at once
	cs.mu.Unlock()
	return n + m, err
}

func nullToken(t uuid.UUID, valid bool) *uuid.UUID {
	if !valid {
		return nil
	}
	return &t
}

func containsInt64(xs []int64, x int64) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

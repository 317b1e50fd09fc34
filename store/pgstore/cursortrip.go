package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/failpoint"
	"github.com/outbox-dev/outbox/store"
)

// CursorTrip is one round trip of the cursor strategy's marks and claims,
// as it planned it: every part that is set is sent, in one transaction.
type CursorTrip struct {
	// LeaderToken is the lead's lease token when the trip was planned. It
	// fences Save: under a token whose lease was taken over the save
	// changes nothing, and it locks the cursor row, which fences Table
	// after it. Table therefore needs Save.
	LeaderToken uuid.UUID
	// Read, when not nil, is the leader's read.
	Read *CursorReadRequest
	// Save, when not nil, is the leader's save.
	Save *CursorSave
	// Table are records of the leader's window that move to the table path
	// (QUEUED to PENDING; queries/cursor_table.sql).
	Table []int64
	// MarkSeqs are table-path messages held by claim MarkToken, to mark
	// SENT.
	MarkToken uuid.UUID
	MarkSeqs  []int64
	// Lead, when not nil, is a standby's attempt to lead.
	Lead *CursorLeadAttempt
	// Claim, when not nil, is a claim of the table path (the due messages
	// that are not QUEUED) under ClaimToken.
	Claim      *store.ClaimParams
	ClaimToken uuid.UUID
}

// Sends reports whether the round trip has anything to send.
func (t *CursorTrip) Sends() bool {
	return t.Read != nil || t.Save != nil || t.Lead != nil || t.Claim != nil || len(t.MarkSeqs) > 0 || len(t.Table) > 0
}

// CursorTripResult is what a committed round trip answered.
type CursorTripResult struct {
	// Read is the read's result (Read was set).
	Read CursorRead
	// Saved reports that the save changed the cursor row: the lead held
	// (Save was set). False: another relay took the lease over, and
	// neither the save nor Table changed anything.
	Saved bool
	// Marked is how many of MarkSeqs were marked SENT.
	Marked int64
	// Lead is the answer to the attempt to lead (Lead was set).
	Lead CursorLead
	// Claimed are the table path's messages claimed, in seq order (Claim
	// was set).
	Claimed []outbox.Record
	// Sent is when the round trip was sent.
	Sent time.Time
}

// Trip sends t in one round trip and waits until it committed. On error
// nothing of it counts: a lost reply may hide a committed save or
// takeover, whose lease then simply runs out.
//
// The parts run in this order: the read, the save, the move to the table
// path, the marks, the attempt to lead, the table path's claim. The read
// comes first because the bound of the gaps it finds is a transaction id
// taken after its snapshot, and a write before it would have taken that
// id earlier, before writers still open. The save comes before the move,
// which its lock on the cursor row fences. A trip with Table and no Save
// is refused with an error wrapping ErrInvalidConfig.
func (d *CursorDB) Trip(ctx context.Context, t *CursorTrip) (CursorTripResult, error) {
	s := d.s
	var r CursorTripResult
	if len(t.Table) > 0 && t.Save == nil {
		return r, fmt.Errorf("%w: CursorTrip.Table: needs Save, whose lock on the cursor row fences the move", ErrInvalidConfig)
	}
	b := s.relayBatch()
	// The read comes first: the bound of the gaps it finds is a
	// transaction id it takes after its snapshot (queries/cursor_read.sql),
	// and any write before it in the round trip's transaction (the save,
	// a mark, a claim) would have taken the id already, before writers
	// that took theirs while it ran. Such a bound could close the gap of a
	// writer still open, and lose its message.
	if t.Read != nil {
		r.Read.Sent = time.Now()
		s.queueCursorRead(b, t.Read, &r.Read)
	}
	pauseSave := false
	if t.Save != nil {
		pauseSave = s.queueCursorSave(b, t.LeaderToken, t.Save, &r.Saved)
	}
	if len(t.Table) > 0 {
		b.Queue(s.q.cursorTable, t.LeaderToken, t.Table)
	}
	if len(t.MarkSeqs) > 0 {
		b.Queue(s.q.markSent, t.MarkSeqs, t.MarkToken).Exec(func(tag pgconn.CommandTag) error { r.Marked += tag.RowsAffected(); return nil })
	}
	if t.Lead != nil {
		queueLeadAttempt(s, b, t.Lead, &r.Lead)
	}
	var scan *claimScan
	if t.Claim != nil {
		scan = s.queueTableClaim(b, t.Claim, t.ClaimToken, &r.Claimed)
		defer scan.done()
	}
	r.Sent = time.Now()
	br := s.pool.SendBatch(ctx, b)
	if pauseSave {
		// The batch is on the wire: the server runs the save's UPDATE and
		// then pauses before the commit. A crash test kills the process now.
		failpoint.Announce(cursorSaveFailpoint)
	}
	if err := br.Close(); err != nil {
		return CursorTripResult{}, err
	}
	if scan != nil {
		s.floor.end(*scan)
	}
	return r, nil
}

// queueCursorSave queues the leader's save (queries/cursor_save.sql) under
// its lease token tok, whose success lands in saved, and with the save's
// failpoint armed a pause after it, before the round trip commits; it
// reports whether it queued the pause.
func (s *Store) queueCursorSave(b *pgx.Batch, tok uuid.UUID, save *CursorSave, saved *bool) bool {
	b.Queue(s.q.cursorSave, tok, save.Pos, save.Lease.Milliseconds(), save.Head, save.Lo, save.Hi).
		Exec(func(t pgconn.CommandTag) error { *saved = t.RowsAffected() > 0; return nil })
	pause := failpoint.Enabled && failpoint.Armed(cursorSaveFailpoint)
	if pause {
		b.Queue(s.q.failpointWatch)
		b.Queue(s.q.failpointPause)
	}
	return pause
}

// queueLeadAttempt queues an attempt to lead (queries/cursor_state.sql),
// whose answer lands in lead.
func queueLeadAttempt(s *Store, b *pgx.Batch, a *CursorLeadAttempt, lead *CursorLead) {
	b.Queue(s.q.cursorState, a.Owner, a.Token, a.Lease.Milliseconds(), true).QueryRow(func(row pgx.Row) error {
		return row.Scan(&lead.Active, &lead.Pos, &lead.Head, &lead.Lo, &lead.Hi)
	})
}

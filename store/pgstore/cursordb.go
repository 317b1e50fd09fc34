package pgstore

import (
	"errors"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
)

// Defaults of the cursor settings of Config.
const (
	// DefaultCursorSaveInterval is the default of Config.CursorSaveInterval.
	DefaultCursorSaveInterval = 100 * time.Millisecond
	// DefaultCursorReadAhead is the default of Config.CursorReadAhead.
	DefaultCursorReadAhead = 1000
)

// DefaultLeaderLease is the default of Config.LeaderLease.
const DefaultLeaderLease = 5 * time.Second

// minLeaderLease is the shortest Config.LeaderLease.
const minLeaderLease = time.Second

// cursorSaveFailpoint names the crash point inside the transaction of a
// round trip that saves the position (internal/e2e/cursor_test.go).
const cursorSaveFailpoint = "pgstore-cursor-save-before-commit"

// ErrNotCursorMode is wrapped by the errors of the cursor strategy's claims
// (package relay/cursor, which finds the mode with [CursorDB.ReadMode])
// when the outbox is not in cursor mode: its messages are claimed from the
// table, by [Store.Claim]. It is declared here, beside [ErrNotClaimMode],
// for package relay/modes, which switches on both. Test for it with
// errors.Is.
var ErrNotCursorMode = errors.New("pgstore: not in cursor mode")

// ErrCursorMode is wrapped by the errors of [EnableCursor] and
// [DisableCursor] when the outbox cannot switch.
var ErrCursorMode = errors.New("pgstore: cursor mode")

// CursorDB is the database side of the cursor strategy (package
// relay/cursor; see the package documentation, "Cursor mode"): the SQL of
// cursor mode and its execution, for one relay. The strategy decides what
// to send (its window, lead and marks live in memory, in relay/cursor);
// CursorDB sends it and returns what the database answered. Trip,
// MarkFailed, Renew, Resign and Release are one round trip each, in one
// transaction, on the Store's pool and with the relay's session settings;
// ReadMode is one, or more on an outbox that lacks cursor mode's
// migrations. It keeps none of the strategy's state, and is safe for
// concurrent use. Its types serve package relay/cursor: they follow that
// package, and carry no promise of their own to other callers.
type CursorDB struct {
	s *Store
}

// CursorDB returns the database side of the cursor strategy on the store's
// outbox. It does not touch the database.
func (s *Store) CursorDB() *CursorDB {
	return &CursorDB{s: s}
}

// CursorSettings are the Config values the cursor strategy runs by, with
// their defaults applied.
type CursorSettings struct {
	// Schema is Config.Schema.
	Schema string
	// Logger is Config.Logger.
	Logger *slog.Logger
	// SaveInterval is Config.CursorSaveInterval: how often the leader saves
	// its position while messages are acknowledged; negative: with every
	// mark.
	SaveInterval time.Duration
	// ReadAhead is Config.CursorReadAhead: the most records the leader
	// holds in memory.
	ReadAhead int
	// LeaderLease is Config.LeaderLease: the lease of the lead.
	LeaderLease time.Duration
	// FullClaimInterval is Config.FullClaimInterval: how often the table
	// path is claimed when the last claim found nothing.
	FullClaimInterval time.Duration
	// ModeCheckInterval is how long a relay that found claim mode waits
	// before it reads the mode again.
	ModeCheckInterval time.Duration
}

// Settings returns the store's cursor settings.
func (d *CursorDB) Settings() CursorSettings {
	s := d.s
	c := CursorSettings{
		Schema: s.cfg.Schema, Logger: s.cfg.Logger,
		SaveInterval: s.cfg.CursorSaveInterval, ReadAhead: s.cfg.CursorReadAhead,
		LeaderLease: s.cfg.LeaderLease, FullClaimInterval: s.fullClaimInterval(),
		ModeCheckInterval: modeCheckInterval,
	}
	if c.SaveInterval == 0 {
		c.SaveInterval = DefaultCursorSaveInterval
	}
	if c.ReadAhead == 0 {
		c.ReadAhead = DefaultCursorReadAhead
	}
	if c.LeaderLease == 0 {
		c.LeaderLease = DefaultLeaderLease
	}
	return c
}

// Explain names the fix of the set-up errors a caller of CursorDB can
// meet, as the Store's own methods do: missing outbox tables
// ([NotMigrated]) and cached statements behind a transaction pooler
// ([ExplainPoolerError]). Other errors are returned as they are.
func (d *CursorDB) Explain(err error) error { return d.s.explain(err) }

// CursorSave is a leader's save of its position (queries/cursor_save.sql),
// which also renews its lease.
type CursorSave struct {
	// Pos is the position: every QUEUED message at or below it is handled.
	Pos int64
	// Head is the highest seq the leader read, and Lo and Hi the ranges of
	// (Pos, Head] it has not handled (open records and gaps), ascending:
	// a successor does not publish again the other seqs of (Pos, Head].
	// Head nil keeps what was saved (the leader had too many ranges).
	Head   *int64
	Lo, Hi []int64
	// Lease is the lease the save renews, from the round trip's start.
	Lease time.Duration
}

// CursorLeadAttempt is a relay's attempt to lead the cursor
// (queries/cursor_state.sql): it leads if no lease holds, or the lease
// ended.
type CursorLeadAttempt struct {
	// Owner names the relay in outbox_cursor.
	Owner string
	// Token is the lease token the relay leads under if it wins.
	Token uuid.UUID
	// Lease is the lease it takes.
	Lease time.Duration
}

// CursorLead is what an attempt to lead answered.
type CursorLead struct {
	// Active reports that the outbox is in cursor mode. The attempt made
	// no change otherwise.
	Active bool
	// Pos is the saved position to lead from; nil: the attempt lost
	// (another relay leads).
	Pos *int64
	// Head, Lo and Hi are what the last leader saved as handled above Pos
	// (CursorSave); Head nil: nothing.
	Head   *int64
	Lo, Hi []int64
}

// CursorReadRequest is the leader's read of the log
// (queries/cursor_read.sql).
type CursorReadRequest struct {
	// From is the head: HeadLimit rows above it are read, in seq order.
	From      int64
	HeadLimit int
	// GapLo and GapHi are the gaps (seq ranges not visible at an earlier
	// read) to read again, at most GapLimit rows of them.
	GapLo, GapHi []int64
	GapLimit     int
}

// CursorRow is one row a cursor read returned.
type CursorRow struct {
	// Record is the message. Its Status is PENDING, as a cursor message is
	// handed out, whatever the row holds; Queued says what the row holds.
	Record outbox.Record
	// Queued reports that the row is a cursor message (status QUEUED).
	// Other rows are the table path's.
	Queued bool
	// Blocked reports that an earlier message of its aggregate is in the
	// table path (PENDING, FAILED, IN_FLIGHT or DEAD_LETTER), so that this
	// one must follow it there.
	Blocked bool
}

// CursorRead is the result of one read (queries/cursor_read.sql).
type CursorRead struct {
	// Xmin is the read's snapshot's xmin; Xmax the bound of the gaps it
	// finds: a transaction id given out after the snapshot was taken, not
	// the snapshot's own xmax. Every transaction that may hold a seq the
	// read did not see has a lower id.
	Xmin, Xmax uint64
	// GapRows are the visible rows inside the gaps the read asked about, in
	// seq order; GapsComplete reports that the read returned all of them
	// (it did not hit GapLimit).
	GapRows      []CursorRow
	GapsComplete bool
	// HeadRows are the rows above the head, in seq order.
	HeadRows []CursorRow
	// Sent is when the read was sent, Returned when it came back.
	Sent, Returned time.Time
}

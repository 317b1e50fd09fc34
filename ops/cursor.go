package ops

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox/store/pgstore"
)

// Mode is an outbox's relay mode, as the outbox records it
// (pgstore.Store.Mode; 'outbox mode').
type Mode = pgstore.Mode

// The relay modes (see pgstore.Store.SetMode).
const (
	// ModeClaim: relays claim each message and mark it SENT (the default).
	ModeClaim = pgstore.ModeClaim
	// ModeCursor: one relay, the leader, reads new messages in seq order
	// and keeps its place in the outbox, its saved position.
	ModeCursor = pgstore.ModeCursor
	// ModeCDC: one relay of package cdc reads the inserts from the WAL.
	ModeCDC = pgstore.ModeCDC
)

// CursorState is the cursor of cursor mode and its lag, as [Ops.Cursor]
// and [Ops.Stats] read it.
//
// In cursor mode a message's row is not changed when it is published: its
// state (pgstore's outbox_message_states) is SENT once the cursor's saved
// position passed it (seq <= Position) and PENDING before. The position is
// saved by the
// leading relay every pgstore.Config.CursorSaveInterval (100 ms) while it
// moves, so the figures here are as of SavedAt: messages acknowledged
// since count as unsent for that long, and messages the leader holds
// leased count as unsent (PENDING), not IN_FLIGHT.
type CursorState struct {
	// At is the database clock when the state was read.
	At time.Time
	// Mode is the outbox's relay mode, as it records it (ModeCursor while
	// cursor mode is on); ModeSince is when the outbox entered it and
	// ModeBy who switched it (both zero before migration 017, when the mode
	// is derived; see pgstore.ModeState).
	Mode      Mode
	ModeSince time.Time
	ModeBy    string
	// Present is true once cursor mode was turned on: the cursor exists.
	// It stays after DisableCursor (Mode is ModeClaim again), so that the
	// messages of cursor mode at or below Position still count as SENT.
	// Without it there are no such messages, and the fields below are
	// zero.
	Present bool
	// Position is the saved position: every message of cursor mode with a
	// seq at or below it was published, or moved to the table path
	// (PENDING, FAILED, DEAD_LETTER, claimed as in claim mode).
	Position int64
	// SavedAt is when the leader last saved Position (it also renews its
	// lease then, at least every third of the lease).
	SavedAt time.Time
	// EnabledAt is when cursor mode was last turned on.
	EnabledAt time.Time
	// Leader is the relay (its lease owner) that holds, or last held, the
	// cursor's lease, and LeaseExpiresAt when that lease ends or ended;
	// both zero when no relay took it since cursor mode was turned on or
	// since the last leader resigned.
	Leader         string
	LeaseExpiresAt time.Time
	// Leading is true while Leader's lease has not expired: a relay reads
	// and publishes the messages of cursor mode. Without a leader nothing
	// passes the position.
	Leading bool
	// HandledHead is the leader's head at its last save, when it is above
	// Position: every seq in (Position, HandledHead] was handled (published
	// or moved to the table path) but those in UnhandledRanges ranges (read
	// and not acknowledged yet, or in a gap: a transaction that may still
	// commit holds the position). A new leader does not publish the handled
	// ones again. Zero when nothing above the position was recorded
	// (before migration 011, or nothing handled above it).
	HandledHead     int64
	UnhandledRanges int
	// LagMessages counts the unsent messages of cursor mode (seq above
	// Position). They are included in Stats.Counts[PENDING].
	LagMessages int64
	// OldestUnsentAt is when the first of them in seq order was created;
	// zero when there is none. LagAge is At minus it: how far the cursor
	// is behind (0 when nothing waits).
	OldestUnsentAt time.Time
	LagAge         time.Duration
}

// Cursor reads the state of the outbox's cursor (pgstore's
// outbox_cursor_state) and its lag, in one round trip: the lag is a range
// scan of the primary key above the position, which costs in proportion
// to the lag. In claim mode, with cursor mode never used, it returns Mode
// ModeClaim and Present false.
func (o *Ops) Cursor(ctx context.Context) (CursorState, error) {
	var c CursorState
	err := o.sendBatch(ctx, func(b *pgx.Batch) {
		o.queueCursor(b, &c)
		o.queueCursorLag(b, &c)
	})
	if err != nil {
		return CursorState{}, fmt.Errorf("ops: cursor: %w", o.dbErr(err))
	}
	if err := o.readMode(ctx, &c); err != nil {
		return CursorState{}, fmt.Errorf("ops: cursor: %w", err)
	}
	return c, nil
}

// sendBatch sends the statements that queue adds in one round trip, if it
// adds any.
func (o *Ops) sendBatch(ctx context.Context, queue func(*pgx.Batch)) error {
	b := &pgx.Batch{}
	queue(b)
	if b.Len() == 0 {
		return nil
	}
	return o.pool.SendBatch(ctx, b).Close()
}

// queueCursor queues stats_cursor.sql, which fills c but for its lag.
func (o *Ops) queueCursor(b *pgx.Batch, c *CursorState) {
	b.Queue(o.q.statsCursor).QueryRow(func(row pgx.Row) error {
		var (
			active                   *bool
			position                 *int64
			leader                   *string
			leaseEnd, saved, enabled *time.Time
			handledHead              *int64
			unhandled                int32
		)
		if err := row.Scan(&c.At, &active, &position, &leader, &leaseEnd, &c.Leading, &saved, &enabled, &handledHead, &unhandled); err != nil {
			return err
		}
		if h := deref(handledHead); h > deref(position) {
			c.HandledHead, c.UnhandledRanges = h, int(unhandled)
		}
		c.Present = active != nil
		c.Position, c.Leader = deref(position), deref(leader)
		c.LeaseExpiresAt, c.SavedAt, c.EnabledAt = deref(leaseEnd), deref(saved), deref(enabled)
		return nil
	})
}

// readMode sets c's mode from the outbox's record (pgstore.Store.Mode), so
// that every tool reports the mode the relays follow.
func (o *Ops) readMode(ctx context.Context, c *CursorState) error {
	m, err := o.store.Mode(ctx)
	if err != nil {
		return err
	}
	c.Mode, c.ModeSince, c.ModeBy = m.Mode, m.Since, m.By
	return nil
}

// queueCursorLag queues stats_cursor_lag.sql, which fills c's lag; it is
// queued after queueCursor, whose clock (c.At) LagAge is measured by.
func (o *Ops) queueCursorLag(b *pgx.Batch, c *CursorState) {
	b.Queue(o.q.statsCursorLag).QueryRow(func(row pgx.Row) error {
		var oldest *time.Time
		if err := row.Scan(&c.LagMessages, &oldest); err != nil {
			return err
		}
		if oldest != nil {
			c.OldestUnsentAt = *oldest
			c.LagAge = max(c.At.Sub(*oldest), 0)
		}
		return nil
	})
}

// Bounds of the cursor samples that Stats' SentLastMinute is measured
// against: the newest sample at least cursorRateWindow old is used, if it
// is at most cursorSampleMaxAge old.
const (
	cursorRateWindow   = time.Minute
	cursorSampleMaxAge = 5 * time.Minute
)

// cursorSample is where an earlier Stats of this Ops saw the cursor.
type cursorSample struct {
	at       time.Time // the database clock (Stats.At)
	local    time.Time // the local clock, to choose a sample before the round trip
	position int64
}

// cursorSamples are the recent cursor samples of an Ops, oldest first.
type cursorSamples struct {
	mu      sync.Mutex
	samples []cursorSample
}

// base returns the sample to measure the last minute's throughput against.
func (cs *cursorSamples) base(now time.Time) (cursorSample, bool) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for i := len(cs.samples) - 1; i >= 0; i-- {
		s := cs.samples[i]
		age := now.Sub(s.local)
		if age >= cursorRateWindow {
			return s, age <= cursorSampleMaxAge
		}
	}
	return cursorSample{}, false
}

// add records a sample, unless one was recorded less than
// cursorSampleEvery ago, and forgets those too old to be used.
func (cs *cursorSamples) add(s cursorSample) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if n := len(cs.samples); n > 0 && s.local.Sub(cs.samples[n-1].local) < cursorSampleEvery {
		return
	}
	i := 0
	for i < len(cs.samples) && s.local.Sub(cs.samples[i].local) > cursorSampleMaxAge {
		i++
	}
	cs.samples = append(cs.samples[i:], s)
}

// cursorSampleEvery spaces the samples kept, so that they stay few (at most
// cursorSampleMaxAge / cursorSampleEvery) however often Stats is called.
const cursorSampleEvery = 5 * time.Second

// perMinute scales n messages over d to a minute.
func perMinute(n int64, d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64(float64(n)*float64(time.Minute)/float64(d) + 0.5)
}

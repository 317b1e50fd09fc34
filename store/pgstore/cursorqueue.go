package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox/store"
)

// ErrNotCursorMode is wrapped by the errors of [Cursor.Claim] and
// [Cursor.MarkSentAndClaim] when the outbox is not in cursor mode: its
// messages are claimed from the table, by [Store.Claim]. The message says
// so and what to do. Test for it with errors.Is.
var ErrNotCursorMode = errors.New("pgstore: not in cursor mode")

// Cursor reads an outbox in cursor mode (see the package documentation,
// "Cursor mode") for one relay: it leads the cursor, or stands by, and runs
// the table path. Make one per relay with [Store.Cursor]; it shares the
// Store's pool, its SQL and its Config (CursorSaveInterval,
// CursorReadAhead, LeaderLease, FullClaimInterval). It is safe for
// concurrent use.
//
// It implements [store.Queue], [store.MarkClaimer] and [store.Notifier]
// with the guarantees of [store.Queue]. A claim finds the mode at the
// Cursor's first claim, and again when a standby tries to lead: on an
// outbox that is not in cursor mode, Claim and MarkSentAndClaim return an
// error wrapping [ErrNotCursorMode] and claim nothing (they look again
// after a few seconds).
//
// A Cursor that leads renews its lease on a goroutine of its own until
// [Cursor.Resign], the loss of the lead, or the closing of the pool: call
// Resign when you stop using it (relay/cursor's strategy does, when the
// relay stops).
type Cursor struct {
	s  *Store
	cs cursorState
	// leadIdle replaces leadIdleLimit when set (tests).
	leadIdle time.Duration
}

// Compile-time proof that Cursor is a queue for the relay.
var (
	_ store.Queue       = (*Cursor)(nil)
	_ store.Notifier    = (*Cursor)(nil)
	_ store.MarkClaimer = (*Cursor)(nil)
)

// Cursor returns a new Cursor on the store's outbox, for one relay. It
// does not touch the database.
func (s *Store) Cursor() *Cursor {
	return &Cursor{s: s}
}

// Claim leases up to p.Limit messages to p.Owner for p.Lease under a new
// random token, with the guarantees of [store.Queue]: cursor messages
// from the leader's window (after a read, if it holds too few) and due
// messages of the table path, in one round trip with whatever the cursor
// needs to write. A standby hands out table-path messages only, and tries
// to lead now and then in the same round trip. The records are in Seq
// order. A Limit below 1 claims nothing; a Lease shorter than a
// millisecond is an error. On an outbox that is not in cursor mode it
// returns an error wrapping [ErrNotCursorMode].
func (c *Cursor) Claim(ctx context.Context, p store.ClaimParams) (store.Claim, error) {
	_, cl, err := c.markAndClaim(ctx, uuid.Nil, nil, &p)
	if err != nil {
		return store.Claim{}, fmt.Errorf("pgstore: claim: %w", c.s.explain(err))
	}
	return cl, nil
}

// MarkSentAndClaim marks seqs like [Cursor.MarkSent] and claims the next
// batch like [Cursor.Claim], in one round trip ([store.MarkClaimer]). The
// claim sees the mark. With no seqs it is Claim. On an outbox that is not
// in cursor mode it marks nothing and returns an error wrapping
// [ErrNotCursorMode].
func (c *Cursor) MarkSentAndClaim(ctx context.Context, token uuid.UUID, seqs []int64, p store.ClaimParams) (int64, store.Claim, error) {
	n, cl, err := c.markAndClaim(ctx, token, seqs, &p)
	if err != nil {
		return 0, store.Claim{}, fmt.Errorf("pgstore: mark sent and claim: %w", c.s.explain(err))
	}
	return n, cl, nil
}

// markAndClaim is cursorTrip, after the mode check of a claim (p not nil).
func (c *Cursor) markAndClaim(ctx context.Context, token uuid.UUID, seqs []int64, p *store.ClaimParams) (int64, store.Claim, error) {
	if p != nil {
		c.cs.claimed.Store(time.Now().UnixNano())
		m, err := c.detectMode(ctx, p)
		if err != nil {
			return 0, store.Claim{}, err
		}
		if m != modeCursor {
			return 0, store.Claim{}, fmt.Errorf("%w: the outbox in schema %s is not in cursor mode: its messages are "+
				"claimed from the table (Store.Claim); run the claim strategy (package relay/modes, which runs the outbox's recorded mode as "+
				"'outbox relay' does, or relay/claim), or switch the outbox with 'outbox mode set cursor'", ErrNotCursorMode, c.s.cfg.Schema)
		}
	}
	return c.cursorTrip(ctx, token, seqs, p)
}

// MarkSent marks the messages of claim token sent, and returns how many
// it changed. The leader acknowledges cursor messages in memory, without a
// round trip, and saves its position every Config.CursorSaveInterval
// (every MarkSent, a round trip each, when it is negative); table-path
// messages are marked SENT in the table, in one round trip.
func (c *Cursor) MarkSent(ctx context.Context, token uuid.UUID, seqs []int64) (int64, error) {
	if len(seqs) == 0 {
		return 0, nil
	}
	n, _, err := c.cursorTrip(ctx, token, seqs, nil)
	if err != nil {
		return 0, fmt.Errorf("pgstore: mark sent: %w", c.s.explain(err))
	}
	return n, nil
}

// MarkFailed records failed publishes as [Store.MarkFailed] does, if the
// messages are still held by claim token. A failed cursor message becomes
// FAILED (or DEAD_LETTER) in the table and enters the table path, and the
// later messages of its aggregate that the leader holds follow it there
// as PENDING, in one round trip that also saves the leader's position.
func (c *Cursor) MarkFailed(ctx context.Context, token uuid.UUID, failures []store.Failure) (int64, error) {
	if len(failures) == 0 {
		return 0, nil
	}
	n, err := c.cursorMarkFailed(ctx, token, newFailureArgs(failures))
	if err != nil {
		return 0, fmt.Errorf("pgstore: mark failed: %w", c.s.explain(err))
	}
	return n, nil
}

// Release gives the messages of claim token back unsent and due at once,
// without counting an attempt: a cursor message goes back to the leader's
// window, a table-path message back to the table (as [Store.Release]).
func (c *Cursor) Release(ctx context.Context, token uuid.UUID, seqs []int64) (int64, error) {
	if len(seqs) == 0 {
		return 0, nil
	}
	n, err := c.cursorRelease(ctx, token, seqs)
	if err != nil {
		return n, fmt.Errorf("pgstore: release: %w", c.s.explain(err))
	}
	return n, nil
}

// Notifications is [Store.Notifications].
func (c *Cursor) Notifications(ctx context.Context) (<-chan struct{}, error) {
	return c.s.Notifications(ctx)
}

// Idle is [Store.Idle], but a standby (a Cursor that does not lead)
// does not register: only the leader publishes new messages, and a
// standby's table path and its attempts to lead run at its poll interval
// anyway.
func (c *Cursor) Idle(ctx context.Context, owner string, d time.Duration) error {
	if c.cs.standby() {
		return nil
	}
	return c.s.Idle(ctx, owner, d)
}

// Busy is [Store.Busy].
func (c *Cursor) Busy(ctx context.Context, owner string) error {
	return c.s.Busy(ctx, owner)
}

package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrNotClaimMode is wrapped by the errors of [Store.Claim] and
// [Store.MarkSentAndClaim] when the outbox is in cursor mode: its new
// messages are QUEUED, for the leader of the cursor strategy (package
// relay/cursor) to read, and no claim finds them. The message says so and
// what to do. Test for it with errors.Is.
var ErrNotClaimMode = errors.New("pgstore: not in claim mode")

// modeCheckInterval is how often a Store's claims check whether cursor
// mode was turned on, and how long the cursor strategy, once it found
// claim mode, refuses before it reads the mode again
// (CursorSettings.ModeCheckInterval).
const modeCheckInterval = 5 * time.Second

// claimModes is what a Store knows of its outbox's mode: whether its
// claims may run. mu guards the fields; it is never held during a round
// trip.
type claimModes struct {
	mu sync.Mutex
	// read: the mode was read once. cursor: cursor mode was on at the last
	// check, when checkedAt.
	read, cursor bool
	checkedAt    time.Time
	// noCursor: outbox_cursor did not exist (before migration 010), so the
	// check cannot travel in a claim's round trip, whose transaction it
	// would fail.
	noCursor bool
}

// readDue reports whether a claim must read the mode in a round trip of
// its own first: before the Store's first claim, and every
// modeCheckInterval while the outbox is in cursor mode or has no
// outbox_cursor.
func (m *claimModes) readDue() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.read || ((m.cursor || m.noCursor) && time.Since(m.checkedAt) >= modeCheckInterval)
}

// inCursor reports whether the last check found cursor mode.
func (m *claimModes) inCursor() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cursor
}

// checkDue reports whether a claim should check the mode in its round
// trip, and if so counts the check as made.
func (m *claimModes) checkDue() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.read || m.cursor || m.noCursor || time.Since(m.checkedAt) < modeCheckInterval {
		return false
	}
	m.checkedAt = time.Now()
	return true
}

// checked takes the result of a check: whether cursor mode is on.
func (m *claimModes) checked(active bool) {
	m.set(active, false)
}

// set records a read of the mode: whether cursor mode is on, and whether
// outbox_cursor is missing.
func (m *claimModes) set(active, noCursor bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.read, m.cursor, m.noCursor, m.checkedAt = true, active, noCursor, time.Now()
}

// claimMode returns nil when the Store may claim, and an error wrapping
// ErrNotClaimMode when the outbox is in cursor mode. It reads the mode in
// a round trip of its own when readDue says so.
func (s *Store) claimMode(ctx context.Context) error {
	if s.modes.readDue() {
		var active bool
		err := s.pool.QueryRow(ctx, s.q.cursorMode).Scan(&active)
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr) && pgErr.Code == codeUndefinedTable: // before migration 010
			s.modes.set(false, true)
		case err != nil:
			return fmt.Errorf("read the relay mode: %w", err)
		default:
			s.modes.checked(active)
		}
	}
	if s.modes.inCursor() {
		return fmt.Errorf("%w: the outbox in schema %s is in cursor mode: its new messages are QUEUED for the leader of "+
			"the cursor strategy, and no claim finds them; run the cursor strategy (package relay/modes, which runs "+
			"the outbox's recorded mode as 'outbox relay' does, or relay/cursor), or switch the outbox with "+
			"'outbox mode set claim'", ErrNotClaimMode, s.cfg.Schema)
	}
	return nil
}

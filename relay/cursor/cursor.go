package cursor

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox/relay/strategy"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// Strategy is the cursor strategy of one relay on a PostgreSQL outbox in
// cursor mode: it leads the cursor, or stands by, and runs the table path.
// It runs on the Store's pool, its SQL ([pgstore.CursorDB]) and its Config
// (CursorSaveInterval, CursorReadAhead, LeaderLease, FullClaimInterval). It
// is safe for concurrent use.
//
// A claim finds the mode at the Strategy's first claim, and again when a
// standby tries to lead: on an outbox that is not in cursor mode, Claim,
// MarkSentAndClaim and a MarkSent that claims return an error wrapping
// [pgstore.ErrNotCursorMode] and claim nothing (they look again after a few
// seconds).
//
// A Strategy that leads renews its lease on a goroutine of its own until
// [Strategy.Close] (or Resign), the loss of the lead, or the closing of the
// pool. A lead whose Strategy gets no claim for two minutes is given up.
type Strategy struct {
	db  *pgstore.CursorDB
	st  *pgstore.Store
	set pgstore.CursorSettings
	cs  cursorState
	// leadIdle replaces leadIdleLimit when set (tests).
	leadIdle time.Duration
}

var _ strategy.Strategy = (*Strategy)(nil)

// New returns the cursor strategy of one relay on st's outbox. Each relay
// needs its own. It does not touch the database.
func New(st *pgstore.Store) *Strategy {
	db := st.CursorDB()
	return &Strategy{db: db, st: st, set: db.Settings()}
}

// Claim leases up to p.Limit messages to p.Owner for p.Lease under a new
// random token, with the guarantees of [store.Queue]: cursor messages from
// the leader's window (after a read, if it holds too few), in runs when
// p.MaxRun is above 1 (see Runs in the package documentation), and due
// messages of the table path, in one round trip with whatever the cursor needs to
// write. A standby hands out table-path messages only, and tries to lead
// now and then in the same round trip. The records are in Seq order. A
// Limit below 1 claims nothing; a Lease shorter than a millisecond is an
// error. On an outbox that is not in cursor mode it returns an error
// wrapping [pgstore.ErrNotCursorMode].
func (s *Strategy) Claim(ctx context.Context, p store.ClaimParams) (store.Claim, error) {
	_, cl, err := s.markAndClaim(ctx, uuid.Nil, nil, &p)
	if err != nil {
		return store.Claim{}, fmt.Errorf("cursor: claim: %w", s.db.Explain(err))
	}
	return cl, nil
}

// MarkSent marks seqs of claim token sent. While the Strategy leads, the
// mark of cursor messages is answered from memory: it marks alone and
// returns no claim, so that the batch's acknowledgement does not wait for
// the next claim's round trip. Otherwise, when next is not nil, it lingers
// (next.Linger) and marks and claims the next batch in one round trip
// ([Strategy.MarkSentAndClaim]).
func (s *Strategy) MarkSent(ctx context.Context, token uuid.UUID, seqs []int64, next *strategy.Next) (int64, *store.Claim, error) {
	if next == nil || s.MarksInMemory() || !next.Linger() {
		n, err := s.markSent(ctx, token, seqs)
		return n, nil, err
	}
	n, c, err := s.MarkSentAndClaim(ctx, token, seqs, next.Params)
	if err != nil {
		return 0, nil, err
	}
	return n, &c, nil
}

// markSent marks the messages of claim token sent, and returns how many it
// changed. The leader acknowledges cursor messages in memory, without a
// round trip, and saves its position every Config.CursorSaveInterval
// (every mark, a round trip each, when it is negative); table-path
// messages are marked SENT in the table, in one round trip.
func (s *Strategy) markSent(ctx context.Context, token uuid.UUID, seqs []int64) (int64, error) {
	if len(seqs) == 0 {
		return 0, nil
	}
	n, _, err := s.trip(ctx, token, seqs, nil)
	if err != nil {
		return 0, fmt.Errorf("cursor: mark sent: %w", s.db.Explain(err))
	}
	return n, nil
}

// MarkSentAndClaim marks seqs as MarkSent does and claims the next batch
// like [Strategy.Claim], in one round trip ([store.MarkClaimer]). The claim
// sees the mark. With no seqs it is Claim. On an outbox that is not in
// cursor mode it marks nothing and returns an error wrapping
// [pgstore.ErrNotCursorMode].
func (s *Strategy) MarkSentAndClaim(ctx context.Context, token uuid.UUID, seqs []int64, p store.ClaimParams) (int64, store.Claim, error) {
	n, cl, err := s.markAndClaim(ctx, token, seqs, &p)
	if err != nil {
		return 0, store.Claim{}, fmt.Errorf("cursor: mark sent and claim: %w", s.db.Explain(err))
	}
	return n, cl, nil
}

// MarkFailed records failed publishes, as package failure decided them,
// if the messages are still held by claim token. A failed cursor message
// becomes FAILED (or DEAD_LETTER) in the table and enters the table path,
// and the later messages of its aggregate that the leader holds follow it
// there as PENDING, in one round trip that also saves the leader's
// position.
func (s *Strategy) MarkFailed(ctx context.Context, token uuid.UUID, failures []store.Failure) (int64, error) {
	if len(failures) == 0 {
		return 0, nil
	}
	n, err := s.markFailed(ctx, token, failures)
	if err != nil {
		return 0, fmt.Errorf("cursor: mark failed: %w", s.db.Explain(err))
	}
	return n, nil
}

// Release gives the messages of claim token back unsent and due at once,
// without counting an attempt: a cursor message goes back to the leader's
// window, a table-path message back to the table (as [pgstore.Store.Release]).
func (s *Strategy) Release(ctx context.Context, token uuid.UUID, seqs []int64) (int64, error) {
	if len(seqs) == 0 {
		return 0, nil
	}
	n, err := s.release(ctx, token, seqs)
	if err != nil {
		return n, fmt.Errorf("cursor: release: %w", s.db.Explain(err))
	}
	return n, nil
}

// Wakeups returns the Strategy's Queue, whose notifications wake the relay
// when messages are committed; a standby does not ask writers to notify.
func (s *Strategy) Wakeups() store.Notifier {
	return s.Queue()
}

// Close resigns the lead, if the Strategy has it ([Strategy.Resign]): the
// position is saved and a standby leads at once.
func (s *Strategy) Close(ctx context.Context) error {
	return s.Resign(ctx)
}

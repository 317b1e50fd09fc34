package cursor

import (
	"context"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox/relay/strategy"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// Strategy is the cursor strategy on one [pgstore.Cursor]. It is safe for
// concurrent use.
type Strategy struct {
	c *pgstore.Cursor
}

var _ strategy.Strategy = (*Strategy)(nil)

// New returns the cursor strategy on c, which must serve this relay only.
func New(c *pgstore.Cursor) *Strategy {
	return &Strategy{c: c}
}

// Claim claims cursor messages from the leader's window and due messages
// of the table path ([pgstore.Cursor.Claim]).
func (s *Strategy) Claim(ctx context.Context, p store.ClaimParams) (store.Claim, error) {
	return s.c.Claim(ctx, p)
}

// MarkSent marks seqs of claim token sent. While the Cursor leads, the mark
// of cursor messages is answered from memory: it marks alone and returns
// no claim, so that the batch's acknowledgement does not wait for the next
// claim's round trip. Otherwise, when next is not nil, it lingers
// (next.Linger) and marks and claims the next batch in one round trip
// ([pgstore.Cursor.MarkSentAndClaim]).
func (s *Strategy) MarkSent(ctx context.Context, token uuid.UUID, seqs []int64, next *strategy.Next) (int64, *store.Claim, error) {
	if next == nil || s.c.MarksInMemory() || !next.Linger() {
		n, err := s.c.MarkSent(ctx, token, seqs)
		return n, nil, err
	}
	n, c, err := s.c.MarkSentAndClaim(ctx, token, seqs, next.Params)
	if err != nil {
		return 0, nil, err
	}
	return n, &c, nil
}

// MarkFailed records failed publishes ([pgstore.Cursor.MarkFailed]): a
// failed cursor message enters the table path, and the later messages of
// its aggregate follow it.
func (s *Strategy) MarkFailed(ctx context.Context, token uuid.UUID, failures []store.Failure) (int64, error) {
	return s.c.MarkFailed(ctx, token, failures)
}

// Release gives messages back unsent ([pgstore.Cursor.Release]).
func (s *Strategy) Release(ctx context.Context, token uuid.UUID, seqs []int64) (int64, error) {
	return s.c.Release(ctx, token, seqs)
}

// Wakeups returns the Cursor, whose notifications wake the relay when
// messages are committed; a standby does not ask writers to notify.
func (s *Strategy) Wakeups() store.Notifier {
	return s.c
}

// Close resigns the lead, if the Cursor has it ([pgstore.Cursor.Resign]):
// the position is saved and a standby leads at once.
func (s *Strategy) Close(ctx context.Context) error {
	return s.c.Resign(ctx)
}

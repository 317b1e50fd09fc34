package claim

import (
	"context"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox/relay/strategy"
	"github.com/outbox-dev/outbox/store"
)

// Strategy is the claim strategy over a store.Queue. Create it with [New];
// its methods may be called by several workers at once, as the queue's
// are.
type Strategy struct {
	q store.Queue
}

var _ strategy.Strategy = (*Strategy)(nil)

// New returns the claim strategy over q, which must not be nil.
func New(q store.Queue) *Strategy { return &Strategy{q: q} }

// Claim leases due messages with the queue's Claim.
func (s *Strategy) Claim(ctx context.Context, p store.ClaimParams) (store.Claim, error) {
	return s.q.Claim(ctx, p)
}

// MarkSent marks seqs SENT. With next, and a queue that implements
// store.MarkClaimer, it calls next.Linger and then marks and claims the
// next batch in one round trip (MarkSentAndClaim), and returns that claim;
// if Linger reports that the relay no longer wants the batch, it only
// marks. Otherwise it marks with MarkSent and returns a nil claim. On
// error nothing counts as marked or claimed.
func (s *Strategy) MarkSent(ctx context.Context, token uuid.UUID, seqs []int64, next *strategy.Next) (int64, *store.Claim, error) {
	mc, ok := s.q.(store.MarkClaimer)
	if !ok || next == nil || !next.Linger() {
		n, err := s.q.MarkSent(ctx, token, seqs)
		return n, nil, err
	}
	n, c, err := mc.MarkSentAndClaim(ctx, token, seqs, next.Params)
	if err != nil {
		return 0, nil, err
	}
	return n, &c, nil
}

// MarkFailed records failed publishes with the queue's MarkFailed.
func (s *Strategy) MarkFailed(ctx context.Context, token uuid.UUID, failures []store.Failure) (int64, error) {
	return s.q.MarkFailed(ctx, token, failures)
}

// Release gives messages back with the queue's Release.
func (s *Strategy) Release(ctx context.Context, token uuid.UUID, seqs []int64) (int64, error) {
	return s.q.Release(ctx, token, seqs)
}

// Wakeups returns the queue as a store.Notifier if it is one, and nil
// (polling only) otherwise.
func (s *Strategy) Wakeups() store.Notifier {
	n, _ := s.q.(store.Notifier)
	return n
}

// Close does nothing: claims hold no lead, and their leases end by
// themselves.
func (s *Strategy) Close(context.Context) error { return nil }

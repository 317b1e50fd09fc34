package cursor

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox/store"
)

// Queue is a Strategy seen as a store: it implements [store.Queue],
// [store.MarkClaimer] and [store.Notifier] with the guarantees of
// store.Queue, for code that claims and marks without a relay (benchmarks,
// the stores' conformance suite). Its methods are the Strategy's, but for
// MarkSent, which only marks, and the Notifier's. Get one with
// [Strategy.Queue]. A relay runs the Strategy itself
// (relay.Config.Strategy), not its Queue: over a Queue (relay.Config.Store)
// it would run the claim strategy, which neither marks in memory nor
// resigns the lead when the relay stops.
type Queue struct {
	*Strategy
}

// Compile-time proof that Queue is a store.
var (
	_ store.Queue       = (*Queue)(nil)
	_ store.Notifier    = (*Queue)(nil)
	_ store.MarkClaimer = (*Queue)(nil)
)

// Queue returns s as a store.
func (s *Strategy) Queue() *Queue {
	return &Queue{Strategy: s}
}

// MarkSent marks the messages of claim token sent, and returns how many it
// changed. The leader acknowledges cursor messages in memory, without a
// round trip, and saves its position every Config.CursorSaveInterval
// (every MarkSent, a round trip each, when it is negative); table-path
// messages are marked SENT in the table, in one round trip.
func (q *Queue) MarkSent(ctx context.Context, token uuid.UUID, seqs []int64) (int64, error) {
	return q.markSent(ctx, token, seqs)
}

// Notifications is [pgstore.Store.Notifications].
func (q *Queue) Notifications(ctx context.Context) (<-chan struct{}, error) {
	return q.st.Notifications(ctx)
}

// Idle is [pgstore.Store.Idle], but a standby (a Strategy that does not
// lead) does not register: only the leader publishes new messages, and a
// standby's table path and its attempts to lead run at its poll interval
// anyway.
func (q *Queue) Idle(ctx context.Context, owner string, d time.Duration) error {
	if q.cs.standby() {
		return nil
	}
	return q.st.Idle(ctx, owner, d)
}

// Busy is [pgstore.Store.Busy].
func (q *Queue) Busy(ctx context.Context, owner string) error {
	return q.st.Busy(ctx, owner)
}

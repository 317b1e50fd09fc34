package claim_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/relay/claim"
	"github.com/outbox-dev/outbox/relay/strategy"
	"github.com/outbox-dev/outbox/store"
)

// queue is a store.Queue that records its calls in order (shared with the
// next's Linger) and answers with claimed.
type queue struct {
	calls   *[]string
	claimed store.Claim
	err     error // of every call
}

func (q *queue) Claim(context.Context, store.ClaimParams) (store.Claim, error) {
	*q.calls = append(*q.calls, "Claim")
	return q.claimed, q.err
}

func (q *queue) MarkSent(_ context.Context, _ uuid.UUID, seqs []int64) (int64, error) {
	*q.calls = append(*q.calls, "MarkSent")
	return int64(len(seqs)), q.err
}

func (q *queue) MarkFailed(_ context.Context, _ uuid.UUID, f []store.Failure) (int64, error) {
	*q.calls = append(*q.calls, "MarkFailed")
	return int64(len(f)), q.err
}

func (q *queue) Release(_ context.Context, _ uuid.UUID, seqs []int64) (int64, error) {
	*q.calls = append(*q.calls, "Release")
	return int64(len(seqs)), q.err
}

// markClaimer is a queue that marks and claims in one round trip.
type markClaimer struct{ *queue }

func (q markClaimer) MarkSentAndClaim(_ context.Context, _ uuid.UUID, seqs []int64, _ store.ClaimParams) (int64, store.Claim, error) {
	*q.calls = append(*q.calls, "MarkSentAndClaim")
	return int64(len(seqs)), q.claimed, q.err
}

// notifier is a queue with wake-ups.
type notifier struct{ *queue }

func (notifier) Notifications(context.Context) (<-chan struct{}, error) { return nil, nil }
func (notifier) Idle(context.Context, string, time.Duration) error      { return nil }
func (notifier) Busy(context.Context, string) error                     { return nil }

func newQueue() *queue {
	return &queue{calls: new([]string), claimed: store.Claim{Token: uuid.New(), Records: []outbox.Record{{Seq: 9}}}}
}

// next asks for the next batch; its Linger records itself among the
// queue's calls and reports want.
func next(q *queue, want bool) *strategy.Next {
	return &strategy.Next{
		Params: store.ClaimParams{Owner: "r", Limit: 10, Lease: time.Second},
		Linger: func() bool {
			*q.calls = append(*q.calls, "Linger")
			return want
		},
	}
}

// With a store.MarkClaimer and a next, MarkSent lingers once and then
// marks and claims in one round trip, and returns the claim; without a
// next it only marks.
func TestMarkSent_MarkClaimer_LingersOnceThenMarksAndClaimsInOneTrip(t *testing.T) {
	q := newQueue()
	s := claim.New(markClaimer{q})
	n, c, err := s.MarkSent(context.Background(), uuid.New(), []int64{1, 2}, next(q, true))
	if err != nil || n != 2 {
		t.Fatalf("MarkSent = %d, %v; want 2 marked", n, err)
	}
	if want := []string{"Linger", "MarkSentAndClaim"}; !slices.Equal(*q.calls, want) {
		t.Fatalf("calls %v; want %v (one linger, before the one round trip)", *q.calls, want)
	}
	if c == nil || c.Token != q.claimed.Token || len(c.Records) != 1 {
		t.Fatalf("claim %v; want the store's %v", c, q.claimed)
	}

	*q.calls = nil
	if _, c, err = s.MarkSent(context.Background(), uuid.New(), []int64{1}, nil); err != nil || c != nil {
		t.Fatalf("MarkSent without next = %v, %v; want no claim, no error", c, err)
	}
	if want := []string{"MarkSent"}; !slices.Equal(*q.calls, want) {
		t.Fatalf("calls without next %v; want %v", *q.calls, want)
	}
}

// A queue without store.MarkClaimer marks with MarkSent and claims
// nothing, and leaves the linger to the relay (after the mark).
func TestMarkSent_PlainQueue_MarksAloneWithoutLingering(t *testing.T) {
	q := newQueue()
	n, c, err := claim.New(q).MarkSent(context.Background(), uuid.New(), []int64{1, 2, 3}, next(q, true))
	if err != nil || n != 3 || c != nil {
		t.Fatalf("MarkSent = %d, %v, %v; want 3 marked, no claim", n, c, err)
	}
	if want := []string{"MarkSent"}; !slices.Equal(*q.calls, want) {
		t.Fatalf("calls %v; want %v", *q.calls, want)
	}
}

// When the linger reports that the relay no longer wants the batch (it
// stops or pauses), MarkSent only marks.
func TestMarkSent_MarksAloneWhenNoBatchIsWanted(t *testing.T) {
	q := newQueue()
	_, c, err := claim.New(markClaimer{q}).MarkSent(context.Background(), uuid.New(), []int64{1}, next(q, false))
	if err != nil || c != nil {
		t.Fatalf("MarkSent after a linger that wants nothing = %v, %v; want no claim", c, err)
	}
	if want := []string{"Linger", "MarkSent"}; !slices.Equal(*q.calls, want) {
		t.Fatalf("calls %v; want %v", *q.calls, want)
	}

}

// A failed round trip counts nothing as marked and nothing as claimed.
func TestMarkSent_FailedTripClaimsNothing(t *testing.T) {
	q := newQueue()
	q.err = errors.New("connection reset")
	n, c, err := claim.New(markClaimer{q}).MarkSent(context.Background(), uuid.New(), []int64{1}, next(q, true))
	if !errors.Is(err, q.err) || n != 0 || c != nil {
		t.Fatalf("MarkSent = %d, %v, %v; want 0, no claim and the store's error", n, c, err)
	}
}

// Claim, MarkFailed and Release are the queue's.
func TestClaimMarkFailedRelease_AreTheQueues(t *testing.T) {
	q := newQueue()
	s := claim.New(q)
	ctx := context.Background()
	c, err := s.Claim(ctx, store.ClaimParams{Owner: "r", Limit: 1, Lease: time.Second})
	if err != nil || c.Token != q.claimed.Token {
		t.Fatalf("Claim = %v, %v; want the store's claim", c, err)
	}
	if n, err := s.MarkFailed(ctx, c.Token, []store.Failure{{Seq: 9}}); err != nil || n != 1 {
		t.Fatalf("MarkFailed = %d, %v", n, err)
	}
	if n, err := s.Release(ctx, c.Token, []int64{9}); err != nil || n != 1 {
		t.Fatalf("Release = %d, %v", n, err)
	}
	if want := []string{"Claim", "MarkFailed", "Release"}; !slices.Equal(*q.calls, want) {
		t.Fatalf("calls %v; want %v", *q.calls, want)
	}
}

// Wakeups is the queue's store.Notifier, or nil: the relay then polls.
func TestWakeups_TheQueuesNotifierOrNil(t *testing.T) {
	q := newQueue()
	if w := claim.New(q).Wakeups(); w != nil {
		t.Errorf("Wakeups of a queue without notifications = %v; want nil", w)
	}
	n := notifier{q}
	if w := claim.New(n).Wakeups(); w != n {
		t.Errorf("Wakeups = %v; want the queue %v", w, n)
	}
}

// Close does nothing: claims hold no lead.
func TestClose_DoesNothing(t *testing.T) {
	q := newQueue()
	if err := claim.New(q).Close(context.Background()); err != nil || len(*q.calls) != 0 {
		t.Fatalf("Close = %v with calls %v; want nil and none", err, *q.calls)
	}
}

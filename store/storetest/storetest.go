package storetest

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/store"
)

// Harness is one fresh, migrated, empty store, as the suite sees it.
type Harness struct {
	// Queue is the store under test. Required.
	Queue store.Queue
	// Enqueue writes msgs in a transaction of its own and commits it, with
	// the store's Enqueue (so validation included). Required.
	Enqueue func(ctx context.Context, msgs ...outbox.Message) error
	// EnqueueRollback writes msgs with the store's Enqueue in a transaction
	// that it then rolls back. It returns the first error of the enqueue or
	// the rollback. Required.
	EnqueueRollback func(ctx context.Context, msgs ...outbox.Message) error
	// Get returns the stored message with the event id. Required.
	Get func(ctx context.Context, id uuid.UUID) (outbox.Record, error)
	// ErrNotFound is the sentinel that Get wraps for an unknown id. Defaults
	// to nil, which only requires an error.
	ErrNotFound error
	// Counts returns the number of messages per status. Defaults to nil,
	// which skips the subtests that need it.
	Counts func(ctx context.Context) (map[outbox.Status]int64, error)
	// Cleanup deletes SENT messages published at least olderThan ago, in
	// batches of at most batch rows, and returns how many it deleted.
	// Defaults to nil, which skips the subtests that need it.
	Cleanup func(ctx context.Context, olderThan time.Duration, batch int) (int64, error)
	// InsertUnchecked writes m as a row whose headers column holds headers,
	// JSON text taken as it is, with plain SQL that bypasses the store's
	// rule that headers are a JSON object of string values: a row written
	// before that rule existed. m.Headers is ignored. Defaults to nil,
	// which skips the subtests that need it.
	InsertUnchecked func(ctx context.Context, m outbox.Message, headers string) error
	// Concurrent says that several claims may run at the same time (several
	// connections). Defaults to false, which skips the concurrent-claims
	// subtests.
	Concurrent bool
	// Runs says that the store claims runs: with ClaimParams.MaxRun above
	// 1, a claim leases with each head the messages of its aggregate right
	// after it (store.ClaimParams). Defaults to false, which skips the
	// subtests of runs, but for the one that MaxRun 0 and 1 claim heads
	// only: a store that ignores MaxRun passes it.
	Runs bool
	// ClaimsInMemory says that the store holds the leases of claimed
	// messages in memory rather than in its table (pgstore in cursor mode):
	// Get then reports a claimed message as PENDING without lease fields,
	// and a sent one as SENT without PublishedAt. The claims keep every
	// other guarantee of the suite. Defaults to false: Get shows a claimed
	// message IN_FLIGHT with the claim's lease.
	ClaimsInMemory bool
	// SentDeleted says that MarkSent deletes the messages instead of
	// marking them SENT, keeping no record of the publish (the CDC relay's
	// table path with Cleanup "delete"). Where the suite checks that a
	// sent message is SENT, it then checks that Get finds it no more, and
	// Counts counts no SENT message. Cleanup must be nil: there is nothing
	// for it to delete. Defaults to false: a sent message stays, SENT.
	SentDeleted bool
}

// Timing of the suite.
const (
	// shortLease is the lease of claims that the suite waits out.
	shortLease = 100 * time.Millisecond
	// clockSlack is how far the store's clock and the test's may disagree,
	// and how late a statement may run after the test read the clock.
	clockSlack = 2 * time.Second
	// expiryWait bounds the wait for a short lease to expire.
	expiryWait = 10 * time.Second
	// testTimeout bounds one subtest's database calls.
	testTimeout = 45 * time.Second
)

// spec is one behaviour of the contract.
type spec struct {
	name string
	run  func(t *testing.T, s *suite)
}

// specs lists every subtest of Run, grouped by the call they are about.
var specs = slices.Concat(enqueueSpecs, claimSpecs, runSpecs, leaseSpecs, markSpecs, opsSpecs)

// Run runs the conformance suite, one parallel subtest per behaviour, each
// on a harness that newHarness builds for it (so newHarness must give every
// call a store of its own, and may be called concurrently).
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Helper()
	for _, sp := range specs {
		t.Run(sp.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			if h.Queue == nil || h.Enqueue == nil || h.EnqueueRollback == nil || h.Get == nil {
				t.Fatal("storetest: Harness needs Queue, Enqueue, EnqueueRollback and Get")
			}
			if h.SentDeleted && h.Cleanup != nil {
				t.Fatal("storetest: Harness.Cleanup must be nil with SentDeleted: no SENT message stays to delete")
			}
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			t.Cleanup(cancel)
			sp.run(t, &suite{h: h, ctx: ctx})
		})
	}
}

// suite is what a subtest works with.
type suite struct {
	h   Harness
	ctx context.Context
}

// msg returns a valid message of the aggregate with a fresh id.
func msg(aggregateType, aggregateID string) outbox.Message {
	return outbox.Message{
		ID:            uuid.New(),
		AggregateType: aggregateType,
		AggregateID:   aggregateID,
		EventType:     "Happened",
		Payload:       []byte(`{"n":1}`),
	}
}

// fullMessage sets every field, with a binary payload.
func fullMessage() outbox.Message {
	return outbox.Message{
		ID:            uuid.New(),
		AggregateType: "Order",
		AggregateID:   "order-42",
		EventType:     "OrderPlaced",
		EventVersion:  3,
		Topic:         "orders.v1",
		Payload:       []byte{0x00, 0xff, 0x10, 'x', 0x00},
		ContentType:   "application/octet-stream",
		Headers:       map[string]string{"tenant": "acme", "x-priority": "high ünicode"},
		CorrelationID: "corr-1",
		CausationID:   "cmd-7",
		TraceParent:   "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	}
}

// enqueue commits msgs in one transaction and returns their seqs, in the
// order of msgs.
func (s *suite) enqueue(t *testing.T, msgs ...outbox.Message) []int64 {
	t.Helper()
	if err := s.h.Enqueue(s.ctx, msgs...); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	seqs := make([]int64, len(msgs))
	for i, m := range msgs {
		seqs[i] = s.get(t, m.ID).Seq
	}
	return seqs
}

func (s *suite) get(t *testing.T, id uuid.UUID) outbox.Record {
	t.Helper()
	r, err := s.h.Get(s.ctx, id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return r
}

// assertStoredClaimed checks what Get says of a message claimed by owner
// until leaseEnd (zero: any time): IN_FLIGHT with the lease, or PENDING
// without one for a store that holds its claims in memory.
func (s *suite) assertStoredClaimed(t *testing.T, what string, id uuid.UUID, owner string, leaseEnd time.Time) outbox.Record {
	t.Helper()
	got := s.get(t, id)
	if s.h.ClaimsInMemory {
		if got.Status != outbox.StatusPending || got.LeaseOwner != "" || !got.LeaseExpiresAt.IsZero() {
			t.Errorf("%s: stored %+v; want PENDING without a lease (claims are held in memory)", what, got)
		}
		return got
	}
	if got.Status != outbox.StatusInFlight || got.LeaseOwner != owner || (!leaseEnd.IsZero() && !got.LeaseExpiresAt.Equal(leaseEnd)) {
		t.Errorf("%s: stored %+v; want IN_FLIGHT under %s until %v", what, got, owner, leaseEnd)
	}
	return got
}

// assertSent checks what Get says of a sent message: SENT, or nothing for
// a store whose MarkSent deletes (Harness.SentDeleted). It returns the
// stored record, and whether there is one.
func (s *suite) assertSent(t *testing.T, what string, id uuid.UUID) (outbox.Record, bool) {
	t.Helper()
	if s.h.SentDeleted {
		s.assertGone(t, id)
		return outbox.Record{}, false
	}
	got := s.get(t, id)
	if got.Status != outbox.StatusSent {
		t.Errorf("%s: status %s, want SENT", what, got.Status)
	}
	return got, true
}

// assertGone checks that Get finds no message with the id.
func (s *suite) assertGone(t *testing.T, id uuid.UUID) {
	t.Helper()
	_, err := s.h.Get(s.ctx, id)
	switch {
	case err == nil:
		t.Errorf("Get(%s) found a message, want none", id)
	case s.h.ErrNotFound != nil && !errors.Is(err, s.h.ErrNotFound):
		t.Errorf("Get(%s) error = %v, want one wrapping %v", id, err, s.h.ErrNotFound)
	}
}

// claim claims as owner "relay-A".
func (s *suite) claim(t *testing.T, limit int, lease time.Duration) store.Claim {
	t.Helper()
	return s.claimAs(t, "relay-A", limit, lease)
}

func (s *suite) claimAs(t *testing.T, owner string, limit int, lease time.Duration) store.Claim {
	t.Helper()
	c, err := s.h.Queue.Claim(s.ctx, store.ClaimParams{Owner: owner, Limit: limit, Lease: lease})
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if !slices.IsSortedFunc(c.Records, func(a, b outbox.Record) int { return cmp.Compare(a.Seq, b.Seq) }) {
		t.Errorf("claim records not in seq order: %v", seqsOf(c.Records))
	}
	return c
}

// claimOnceExpired claims repeatedly until the claim returns messages, as
// it does once an earlier short lease has run out; it fails the test if
// that takes longer than expiryWait.
func (s *suite) claimOnceExpired(t *testing.T, owner string, limit int, lease time.Duration) store.Claim {
	t.Helper()
	return s.claimOnceExpiredWith(t, store.ClaimParams{Owner: owner, Limit: limit, Lease: lease})
}

// claimOnceExpiredWith is claimOnceExpired with the claim's params.
func (s *suite) claimOnceExpiredWith(t *testing.T, p store.ClaimParams) store.Claim {
	t.Helper()
	deadline := time.Now().Add(expiryWait)
	for {
		c := s.claimRun(t, p.Owner, p.Limit, p.MaxRun, p.MaxRunBytes, p.Lease)
		if len(c.Records) > 0 {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing claimable %v after a lease of %v", expiryWait, shortLease)
		}
		time.Sleep(shortLease / 10)
	}
}

func (s *suite) markSent(t *testing.T, token uuid.UUID, seqs []int64, want int64) {
	t.Helper()
	if n, err := s.h.Queue.MarkSent(s.ctx, token, seqs); err != nil || n != want {
		t.Fatalf("MarkSent(%v) = %d, %v; want %d", seqs, n, err, want)
	}
}

func (s *suite) markFailed(t *testing.T, token uuid.UUID, want int64, failures ...store.Failure) {
	t.Helper()
	if n, err := s.h.Queue.MarkFailed(s.ctx, token, failures); err != nil || n != want {
		t.Fatalf("MarkFailed = %d, %v; want %d", n, err, want)
	}
}

func (s *suite) release(t *testing.T, token uuid.UUID, seqs []int64, want int64) {
	t.Helper()
	if n, err := s.h.Queue.Release(s.ctx, token, seqs); err != nil || n != want {
		t.Fatalf("Release(%v) = %d, %v; want %d", seqs, n, err, want)
	}
}

func assertSeqs(t *testing.T, what string, got []outbox.Record, want ...int64) {
	t.Helper()
	if !slices.Equal(seqsOf(got), want) {
		t.Errorf("%s claimed seqs %v, want %v", what, seqsOf(got), want)
	}
}

// assertNear checks that got is want, give or take clockSlack.
func assertNear(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if got.Before(want.Add(-clockSlack)) || got.After(want.Add(clockSlack)) {
		t.Errorf("%s = %v, want about %v", what, got, want)
	}
}

func seqsOf(recs []outbox.Record) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = r.Seq
	}
	return out
}

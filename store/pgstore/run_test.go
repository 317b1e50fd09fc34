package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgstoretest"
	"github.com/outbox-dev/outbox/store"
)

// claimRun claims as owner with MaxRun maxRun and a lease of a minute.
func (b *bundle) claimRun(t *testing.T, owner string, limit, maxRun int) store.Claim {
	t.Helper()
	c, err := b.Store.Claim(pgstoretest.Context(t), store.ClaimParams{Owner: owner, Limit: limit, Lease: time.Minute, MaxRun: maxRun})
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	return c
}

// holdRows locks the rows of seqs in a transaction of its own, as another
// claim (or any writer) would, until the test ends.
func (b *bundle) holdRows(t *testing.T, seqs ...int64) {
	t.Helper()
	ctx := pgstoretest.Context(t)
	tx, err := b.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	rows, err := tx.Query(ctx, b.SQL("SELECT seq FROM {{schema}}.outbox_messages WHERE seq = ANY ($1) FOR UPDATE"), seqs)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil || len(n) != len(seqs) {
		t.Fatalf("locked %v, %v; want %v", n, err, seqs)
	}
}

// A follower whose row another transaction holds ends the run: FOR UPDATE
// SKIP LOCKED would pass over it, and the run would lease the messages
// after it, out of order. The rows after it are not leased either.
func TestClaimRun_ALockedFollowerEndsTheRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	msgs := []outbox.Message{pgstoretest.Msg("Order", "a"), pgstoretest.Msg("Order", "a"), pgstoretest.Msg("Order", "a"),
		pgstoretest.Msg("Order", "a"), pgstoretest.Msg("Order", "a"), pgstoretest.Msg("Order", "b"), pgstoretest.Msg("Order", "b")}
	s := b.Enqueue(t, msgs...)
	b.holdRows(t, s[2])

	c := b.claimRun(t, "relay-A", 10, 5)
	assertSeqs(t, "claim beside a held follower", c.Records, s[0], s[1], s[5], s[6])
	for _, i := range []int{2, 3, 4} {
		if got := b.Get(t, msgs[i].ID); got.Status != outbox.StatusPending || got.LeaseOwner != "" {
			t.Errorf("message %d after the held follower: %s owned by %q; want PENDING, not leased", s[i], got.Status, got.LeaseOwner)
		}
	}
}

// A head whose row another transaction holds is skipped, as without runs,
// and so are its followers: none of them is a head.
func TestClaimRun_ALockedHeadTakesNoneOfItsAggregate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.Enqueue(t, pgstoretest.Msg("Order", "a"), pgstoretest.Msg("Order", "a"), pgstoretest.Msg("Order", "b"))
	b.holdRows(t, s[0])
	assertSeqs(t, "claim beside a held head", b.claimRun(t, "relay-A", 10, 5).Records, s[2])
}

// MarkSentAndClaim claims runs as Claim does: the claim in the mark's
// round trip sees the run marked and leases the next one.
func TestMarkSentAndClaim_ClaimsRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := pgstoretest.Context(t)
	var msgs []outbox.Message
	for range 6 {
		msgs = append(msgs, pgstoretest.Msg("Order", "a"))
	}
	s := b.Enqueue(t, msgs...)
	p := store.ClaimParams{Owner: "relay-A", Limit: 10, Lease: time.Minute, MaxRun: 3}
	first, err := b.Store.Claim(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	assertSeqs(t, "first claim", first.Records, s[:3]...)
	n, next, err := b.Store.MarkSentAndClaim(ctx, first.Token, s[:3], p)
	if err != nil || n != 3 {
		t.Fatalf("MarkSentAndClaim = %d, %v; want 3 marked", n, err)
	}
	assertSeqs(t, "claim in the mark's round trip", next.Records, s[3:]...)
}

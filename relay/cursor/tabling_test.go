package cursor_test

import (
	"slices"
	"testing"
	"time"

	"github.com/outbox-dev/outbox/internal/pgstoretest"
	"github.com/outbox-dev/outbox/relay/cursor"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// A message the leader reads in the round trip that moves an earlier
// message of its aggregate to the table path follows that one there. The
// read comes first in the round trip, so it cannot see the move: here the
// table path's earlier message (a1) was sent by another relay, a2 waits in
// the leader's window to be moved, and a3 arrives. a3 must not be handed
// out while a2 is unsent (chaos --cursor --seed 12 published it first).
func TestCursor_AMessageReadWhileItsAggregateMovesToTheTablePathFollowsIt(t *testing.T) {
	b := pgstoretest.SetupCursor(t, pgstore.Config{})
	ctx := pgstoretest.Context(t)
	other := b.NewCursor(t, pgstore.Config{})
	p := store.ClaimParams{Owner: "leader", Limit: 100, Lease: time.Minute}
	claim := func(s *cursor.Queue, p store.ClaimParams) store.Claim {
		t.Helper()
		c, err := s.Claim(ctx, p)
		if err != nil {
			t.Fatalf("Claim: %v", err)
		}
		return c
	}

	a1 := b.Enqueue(t, pgstoretest.Msg("Order", "a"))[0]
	c := claim(b.Cursor, p)
	if !slices.Equal(pgstoretest.Seqs(c.Records), []int64{a1}) {
		t.Fatalf("leader's first claim %v, want [%d]", pgstoretest.Seqs(c.Records), a1)
	}
	if n, err := b.Cursor.MarkFailed(ctx, c.Token, []store.Failure{{Seq: a1, Error: "retry", CountAttempt: true}}); err != nil || n != 1 {
		t.Fatalf("MarkFailed = %d, %v; want 1", n, err)
	}
	// The other relay (a standby) takes a1 from the table path.
	po := store.ClaimParams{Owner: "other", Limit: 100, Lease: time.Minute}
	var co store.Claim
	for deadline := time.Now().Add(5 * time.Second); ; {
		if co = claim(other, po); slices.Contains(pgstoretest.Seqs(co.Records), a1) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the other relay did not claim %d from the table path", a1)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The leader reads a2 behind a1 (in flight with the other relay): a2 is
	// to go to the table path with the leader's next save.
	a2 := b.Enqueue(t, pgstoretest.Msg("Order", "a"))[0]
	if c := claim(b.Cursor, p); len(c.Records) != 0 {
		t.Fatalf("leader claimed %v while a1 is in flight elsewhere, want nothing", pgstoretest.Seqs(c.Records))
	}
	if n, err := other.MarkSent(ctx, co.Token, []int64{a1}); err != nil || n != 1 {
		t.Fatalf("MarkSent(a1) = %d, %v; want 1", n, err)
	}
	a3 := b.Enqueue(t, pgstoretest.Msg("Order", "a"))[0]

	var order []int64
	sent := map[int64]bool{}
	for deadline := time.Now().Add(10 * time.Second); len(order) < 2; {
		c := claim(b.Cursor, p)
		for _, r := range c.Records {
			if r.Seq == a3 && !sent[a2] {
				t.Fatalf("a3 (%d) handed out in claim %v while a2 (%d) is unsent", a3, pgstoretest.Seqs(c.Records), a2)
			}
			order = append(order, r.Seq)
		}
		if len(c.Records) > 0 {
			if n, err := b.Cursor.MarkSent(ctx, c.Token, pgstoretest.Seqs(c.Records)); err != nil || n != int64(len(c.Records)) {
				t.Fatalf("MarkSent = %d, %v", n, err)
			}
			for _, r := range c.Records {
				sent[r.Seq] = true
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("claimed %v, want a2 and a3", order)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !slices.Equal(order, []int64{a2, a3}) {
		t.Errorf("aggregate published as %v, want [%d %d]", order, a2, a3)
	}
}

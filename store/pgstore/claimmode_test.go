package pgstore_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgstoretest"
	"github.com/outbox-dev/outbox/relay/cursor"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// A Store claims only in claim mode, a Cursor only in cursor mode: each
// refuses the other mode's claims with its sentinel and an error that
// says what to run instead, and claims nothing.

// In cursor mode Store.Claim and Store.MarkSentAndClaim refuse
// (ErrNotClaimMode) and change nothing, while a claim the Store made
// before the switch is still marked by its token.
func TestStore_RefusesToClaimInCursorMode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := pgstoretest.Context(t)
	p := store.ClaimParams{Owner: "A", Limit: 10, Lease: time.Minute}
	seqs := b.Enqueue(t, pgstoretest.Msg("Order", "1"), pgstoretest.Msg("Order", "2"))
	before, err := b.Store.Claim(ctx, p)
	if err != nil || !slices.Equal(pgstoretest.Seqs(before.Records), seqs) {
		t.Fatalf("claim before the switch = %v, %v; want %v", pgstoretest.Seqs(before.Records), err, seqs)
	}
	if err := b.Store.EnableCursor(ctx); err != nil {
		t.Fatal(err)
	}
	b.Enqueue(t, pgstoretest.Msg("Order", "3"))

	fresh, err := pgstore.New(b.Pool, pgstore.Config{Schema: b.Schema})
	if err != nil {
		t.Fatal(err)
	}
	c, err := fresh.Claim(ctx, p)
	if !errors.Is(err, pgstore.ErrNotClaimMode) || len(c.Records) != 0 {
		t.Fatalf("Store.Claim in cursor mode = %v, %v; want ErrNotClaimMode and nothing claimed", pgstoretest.Seqs(c.Records), err)
	}
	for _, says := range []string{b.Schema, "is in cursor mode", "the cursor strategy", "relay/modes", "relay/cursor", "'outbox mode set claim'"} {
		if !strings.Contains(err.Error(), says) {
			t.Errorf("Store.Claim's refusal %q does not say %q", err, says)
		}
	}
	n, c, err := fresh.MarkSentAndClaim(ctx, before.Token, seqs[:1], p)
	if !errors.Is(err, pgstore.ErrNotClaimMode) || n != 0 || len(c.Records) != 0 {
		t.Fatalf("Store.MarkSentAndClaim in cursor mode = %d, %v, %v; want ErrNotClaimMode, nothing marked or claimed", n, pgstoretest.Seqs(c.Records), err)
	}
	if r := b.getSeq(t, seqs[0]); r != outbox.StatusInFlight {
		t.Fatalf("message %d after the refused MarkSentAndClaim is %s, want IN_FLIGHT", seqs[0], r)
	}

	// The claim made in claim mode is marked as any other.
	if n, err := fresh.MarkSent(ctx, before.Token, seqs[:1]); err != nil || n != 1 {
		t.Errorf("MarkSent of a claim made before the switch = %d, %v; want 1", n, err)
	}
	if n, err := b.Store.MarkFailed(ctx, before.Token, []store.Failure{{Seq: seqs[1], Error: "retry", CountAttempt: true}}); err != nil || n != 1 {
		t.Errorf("MarkFailed of a claim made before the switch = %d, %v; want 1", n, err)
	}
	if r := b.getSeq(t, seqs[0]); r != outbox.StatusSent {
		t.Errorf("message %d is %s, want SENT", seqs[0], r)
	}
	if r := b.getSeq(t, seqs[1]); r != outbox.StatusFailed {
		t.Errorf("message %d is %s, want FAILED", seqs[1], r)
	}
}

// In claim mode the cursor strategy's Claim and MarkSentAndClaim refuse
// (ErrNotCursorMode) and lead nothing; once the outbox is switched to
// cursor mode, the Cursor reads the mode again within a few seconds and
// leads.
func TestCursor_RefusesToClaimInClaimMode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := pgstoretest.Context(t)
	p := store.ClaimParams{Owner: "A", Limit: 10, Lease: time.Minute}
	seqs := b.Enqueue(t, pgstoretest.Msg("Order", "1"))
	cur := cursor.New(b.Store).Queue()
	c, err := cur.Claim(ctx, p)
	if !errors.Is(err, pgstore.ErrNotCursorMode) || len(c.Records) != 0 {
		t.Fatalf("the cursor strategy's Claim in claim mode = %v, %v; want ErrNotCursorMode and nothing claimed", pgstoretest.Seqs(c.Records), err)
	}
	for _, says := range []string{b.Schema, "not in cursor mode", "Store.Claim", "relay/modes", "relay/claim", "'outbox mode set cursor'"} {
		if !strings.Contains(err.Error(), says) {
			t.Errorf("the cursor strategy's refusal %q does not say %q", err, says)
		}
	}
	if _, _, err := cur.MarkSentAndClaim(ctx, c.Token, nil, p); !errors.Is(err, pgstore.ErrNotCursorMode) {
		t.Errorf("Cursor.MarkSentAndClaim in claim mode = %v, want ErrNotCursorMode", err)
	}
	if leading, _ := cur.Leading(); leading {
		t.Error("a Cursor leads in claim mode")
	}
	if r := b.getSeq(t, seqs[0]); r != outbox.StatusPending {
		t.Errorf("message %d after the refused claims is %s, want PENDING", seqs[0], r)
	}

	if err := b.Store.EnableCursor(ctx); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		c, err := cur.Claim(ctx, p)
		if err == nil {
			if !slices.Equal(pgstoretest.Seqs(c.Records), seqs) {
				t.Errorf("the Cursor's first claim in cursor mode = %v, want the table path's %v", pgstoretest.Seqs(c.Records), seqs)
			}
			break
		}
		if !errors.Is(err, pgstore.ErrNotCursorMode) || time.Now().After(deadline) {
			t.Fatalf("the cursor strategy's Claim after EnableCursor = %v; want it to claim within 15 s", err)
		}
	}
	if leading, _ := cur.Leading(); !leading {
		t.Error("the Cursor does not lead after it found cursor mode")
	}
	if err := cur.Resign(ctx); err != nil {
		t.Error(err)
	}
}

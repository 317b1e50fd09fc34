package cursor_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox/internal/leaktest"
	"github.com/outbox-dev/outbox/internal/pgstoretest"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/relay/cursor"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// The leader's own lease (Config.LeaderLease): the Cursor that leads renews
// it by itself, and only while it leads. Not parallel: keepers counts the
// goroutines of the whole test process.

// keepers counts the goroutines that renew a lead's lease, of every Cursor
// in the process.
func keepers() int {
	n := 0
	for stack, count := range leaktest.Snapshot() {
		if strings.Contains(stack, "cursor.(*Strategy).keepLead") {
			n += count
		}
	}
	return n
}

// waitKeepers waits up to within until want goroutines renew a lead's
// lease, and fails t with what otherwise.
func waitKeepers(t *testing.T, want int, within time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		n := keepers()
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d goroutines renew a lead's lease after %s, want %d", what, n, within, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// leaseCursor is a Cursor of a Store on pool over b's outbox with the
// tests' short leader lease.
func leaseCursor(t *testing.T, b *pgstoretest.Bundle, pool *pgxpool.Pool) *cursor.Queue {
	t.Helper()
	s, err := pgstore.New(pool, pgstore.Config{Schema: b.Schema, LeaderLease: pgstoretest.CursorLease})
	if err != nil {
		t.Fatal(err)
	}
	return cursor.New(s).Queue()
}

// leadWithin claims with s until it leads, and fails t after within.
func leadWithin(t *testing.T, s *cursor.Queue, owner string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		pgstoretest.Claim(t, s, owner)
		if leading, _ := s.Leading(); leading {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not lead after %s", owner, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A Cursor that leads keeps its lead while nothing calls it for several
// leases: no claim, no mark (an idle relay, a relay whose only worker waits
// for a broker that does not answer, a relay over a wrapper of the Cursor,
// or a program that drives the Cursor itself). A standby that tries
// meanwhile does not lead. Once the leader's pool is closed nothing renews
// the lease: the renewing goroutine ends, the standby leads once the lease
// ran out, and the old leader knows that it leads no more.
func TestCursor_TheLeaderKeepsItsLeadWithoutRoundTripsUntilItsPoolCloses(t *testing.T) {
	b := pgstoretest.SetupCursor(t, pgstore.Config{})
	waitKeepers(t, 0, 10*time.Second, "before the test (the Cursors of earlier tests)")
	poolA := pgtest.Pool(t, b.Schema)
	a := leaseCursor(t, b, poolA)
	standby := leaseCursor(t, b, b.Pool)
	leadWithin(t, a, "A", 10*time.Second)

	for end := time.Now().Add(4 * pgstoretest.CursorLease); time.Now().Before(end); {
		pgstoretest.Claim(t, standby, "B")
		if leading, _ := standby.Leading(); leading {
			t.Fatal("the standby led while the leader, making no round trip, was to renew its lease")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if leading, _ := a.Leading(); !leading {
		t.Fatal("A lost the lead without a round trip of its own")
	}
	if n := keepers(); n != 1 {
		t.Fatalf("%d goroutines renew the lead's lease, want 1", n)
	}

	poolA.Close()
	waitKeepers(t, 0, 2*pgstoretest.CursorLease, "after A's pool closed")
	leadWithin(t, standby, "B", 10*time.Second)
	if leading, _ := a.Leading(); leading {
		t.Error("A still believes it leads after its pool closed and the standby took over")
	}
}

// The goroutine that renews the lead's lease ends with the lead: at once
// when the leader resigns (Resign returns after it), and when a renewal
// finds the lease taken over, which ends the lead too.
func TestCursor_TheLeaseIsRenewedOnlyWhileTheCursorLeads(t *testing.T) {
	t.Run("resign", func(t *testing.T) {
		b := pgstoretest.SetupCursor(t, pgstore.Config{})
		waitKeepers(t, 0, 10*time.Second, "before the test (the Cursors of earlier tests)")
		a := leaseCursor(t, b, b.Pool)
		leadWithin(t, a, "A", 10*time.Second)
		if n := keepers(); n != 1 {
			t.Fatalf("%d goroutines renew the lead's lease, want 1", n)
		}
		if err := a.Resign(pgstoretest.Context(t)); err != nil {
			t.Fatal(err)
		}
		if n := keepers(); n != 0 {
			t.Errorf("%d goroutines renew a lead's lease after Resign returned, want 0", n)
		}
		owner, _ := b.CursorLeaseHolder(t)
		if owner != "" {
			t.Errorf("the cursor's lease is %q's after Resign, want nobody's", owner)
		}
	})
	t.Run("taken over", func(t *testing.T) {
		b := pgstoretest.SetupCursor(t, pgstore.Config{})
		waitKeepers(t, 0, 10*time.Second, "before the test (the Cursors of earlier tests)")
		a := leaseCursor(t, b, b.Pool)
		leadWithin(t, a, "A", 10*time.Second)
		// Another relay's lease, as a standby takes it over once A's
		// expired (A hung meanwhile, say).
		b.Exec(t, `UPDATE {{schema}}.outbox_cursor
			SET lease_owner = 'B', lease_token = gen_random_uuid(), lease_expires_at = now() + interval '1 minute'`)
		_, token := b.CursorLeaseHolder(t)
		waitKeepers(t, 0, 2*pgstoretest.CursorLease, "after another relay took the lease over")
		if leading, _ := a.Leading(); leading {
			t.Error("A still believes it leads after its renewal found the lease taken over")
		}
		if owner, tok := b.CursorLeaseHolder(t); owner != "B" || tok != token {
			t.Errorf("the cursor's lease is %q's (%s) after A's renewals, want B's (%s), untouched", owner, tok, token)
		}
	})
}

// A leading Cursor that gets no claim for the idle limit (its relay stopped
// without Resign, behind a wrapper that does not pass it on) gives the
// lead up: its keeper stops, and the lease runs out for a standby.
func TestCursor_AnIdleLeaderGivesTheLeadUp(t *testing.T) {
	b := pgstoretest.SetupCursor(t, pgstore.Config{})
	waitKeepers(t, 0, 10*time.Second, "before the test (the Cursors of earlier tests)")
	a := leaseCursor(t, b, b.Pool)
	a.SetLeadIdleLimit(2 * pgstoretest.CursorLease)
	leadWithin(t, a, "A", 10*time.Second)
	waitKeepers(t, 0, 4*pgstoretest.CursorLease+5*time.Second, "after the Cursor got no claim for its idle limit")
	if leading, _ := a.Leading(); leading {
		t.Fatal("A still leads after it got no claim for its idle limit")
	}
	s := leaseCursor(t, b, b.Pool)
	leadWithin(t, s, "B", 3*pgstoretest.CursorLease+5*time.Second)
}

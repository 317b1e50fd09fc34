package pgstore_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgstoretest"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// Leaving cursor mode while a standby tries to lead: the switch and the
// lead are ordered, one after the other, whatever the interleaving, so
// that no message is published both by a leader and by the claims of
// claim mode.

// claimResult is what a claim made on another goroutine returned.
type claimResult struct {
	c   store.Claim
	err error
}

// A standby takes the lead after the switch's first check (which reads
// without a lock) and reads the QUEUED messages before the switch turns
// cursor mode off: the switch sees that lead and is refused, and the
// messages the leader holds stay QUEUED, so the claims do not publish them
// a second time.
func TestCursor_DisableRefusesALeadTakenAfterItsFirstCheck(t *testing.T) {
	b := setupCursor(t, pgstore.Config{})
	ctx := pgstoretest.Context(t)
	seqs := b.Enqueue(t, pgstoretest.Msg("Order", "1"), pgstoretest.Msg("Order", "2"), pgstoretest.Msg("Order", "3"))

	// The switch waits for the mode's row after its first check.
	hold, err := b.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback(ctx) }()
	if _, err := hold.Exec(ctx, b.SQL("SELECT mode FROM {{schema}}.outbox_relay_mode FOR UPDATE")); err != nil {
		t.Fatal(err)
	}
	switched := make(chan error, 1)
	go func() {
		_, err := b.Store.DisableCursor(ctx)
		switched <- err
	}()
	pgtest.AwaitBackend(t, b.Pool, 10*time.Second, "the switch does not wait for the mode's row",
		"wait_event_type = 'Lock' AND query LIKE $1", "%"+b.Schema+"%outbox_relay_mode%FOR UPDATE%")

	standby := b.NewCursor(t, pgstore.Config{LeaderLease: pgstoretest.CursorLease})
	led := pgstoretest.Claim(t, standby, "B")
	if leading, _ := standby.Leading(); !leading || !slices.Equal(pgstoretest.Seqs(led.Records), seqs) {
		t.Fatalf("setup: the standby leads: %v, and holds %v; want it to lead and hold %v", leading, pgstoretest.Seqs(led.Records), seqs)
	}
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err = <-switched:
	case <-time.After(20 * time.Second):
		t.Fatal("the switch did not end")
	}
	if !errors.Is(err, pgstore.ErrModeSwitch) || !strings.Contains(err.Error(), `"B"`) {
		t.Errorf("DisableCursor after B took the lead = %v; want ErrModeSwitch naming B", err)
	}

	// The table path of a standby finds none of the messages B holds.
	other := b.NewCursor(t, pgstore.Config{LeaderLease: pgstoretest.CursorLease})
	for range 5 {
		c := pgstoretest.Claim(t, other, "C")
		for _, s := range pgstoretest.Seqs(c.Records) {
			if slices.Contains(seqs, s) {
				t.Fatalf("message %d, held by the leader B, was claimed again by C", s)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, s := range seqs {
		var status string
		if err := b.Pool.QueryRow(ctx, b.SQL("SELECT status FROM {{schema}}.outbox_messages WHERE seq = $1"), s).Scan(&status); err != nil {
			t.Fatal(err)
		}
		if status != "QUEUED" {
			t.Errorf("message %d is %s after the refused switch, want QUEUED (the leader's)", s, status)
		}
	}
	pgstoretest.MarkSent(t, standby, led)
}

// A standby tries to lead while the switch, past its checks, has turned
// the cursor off but not committed: the standby waits for the switch, then
// finds cursor mode off and does not lead: its table path may claim in
// that round trip, and its next claim refuses (ErrNotCursorMode). The
// messages the switch gave back to the claims are claimed once each, by
// the standby's table path and then by a Store.
func TestCursor_AStandbyThatTriesToLeadDuringDisableDoesNotLead(t *testing.T) {
	b := setupCursor(t, pgstore.Config{})
	ctx := pgstoretest.Context(t)
	seqs := b.Enqueue(t, pgstoretest.Msg("Order", "1"), pgstoretest.Msg("Order", "2"), pgstoretest.Msg("Order", "3"))

	// The switch pauses right after it turned the cursor off, holding its
	// row, until the test lets it go on.
	b.Exec(t, `CREATE FUNCTION {{schema}}.pause_switch() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_advisory_xact_lock(hashtext(TG_TABLE_SCHEMA), 77); RETURN NULL; END $$`)
	b.Exec(t, `CREATE TRIGGER pause_switch AFTER UPDATE OF active ON {{schema}}.outbox_cursor
		FOR EACH ROW WHEN (OLD.active AND NOT NEW.active) EXECUTE FUNCTION {{schema}}.pause_switch()`)
	hold, err := b.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback(ctx) }()
	if _, err := hold.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext($1), 77)", b.Schema); err != nil {
		t.Fatal(err)
	}
	type switchResult struct {
		moved int64
		err   error
	}
	switched := make(chan switchResult, 1)
	go func() {
		moved, err := b.Store.DisableCursor(ctx)
		switched <- switchResult{moved, err}
	}()
	pgtest.AwaitBackend(t, b.Pool, 10*time.Second, "the switch does not pause after turning the cursor off",
		"wait_event = 'advisory' AND query LIKE $1", "%"+b.Schema+"%outbox_cursor%")

	standby := b.NewCursor(t, pgstore.Config{LeaderLease: pgstoretest.CursorLease})
	claimed := make(chan claimResult, 1)
	go func() {
		c, err := standby.Claim(ctx, store.ClaimParams{Owner: "B", Limit: 100, Lease: pgstoretest.CursorLease})
		claimed <- claimResult{c, err}
	}()
	pgtest.AwaitBackend(t, b.Pool, 10*time.Second, "the standby's attempt to lead does not wait for the switch",
		"wait_event_type = 'Lock' AND query LIKE $1", "%"+b.Schema+"%lease_owner = $1%")
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	sw := <-switched
	if sw.err != nil || sw.moved != int64(len(seqs)) {
		t.Fatalf("DisableCursor = %d, %v; want %d messages given back to the claims", sw.moved, sw.err, len(seqs))
	}
	first := <-claimed
	if first.err != nil {
		t.Fatal(first.err)
	}
	if leading, _ := standby.Leading(); leading {
		t.Fatal("the standby leads a cursor that was turned off while it tried")
	}
	if owner, _ := b.CursorLeaseHolder(t); owner != "" {
		t.Fatalf("the cursor's lease is %q's after the switch, want nobody's", owner)
	}

	if c, err := standby.Claim(ctx, store.ClaimParams{Owner: "B", Limit: 100, Lease: pgstoretest.CursorLease}); !errors.Is(err, pgstore.ErrNotCursorMode) {
		t.Fatalf("the standby's claim after the switch = %v, %v; want ErrNotCursorMode", pgstoretest.Seqs(c.Records), err)
	}

	// Every message is claimed, once.
	got := pgstoretest.Seqs(first.c.Records)
	pgstoretest.MarkSent(t, standby, first.c)
	for deadline := time.Now().Add(10 * time.Second); len(got) < len(seqs); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("claimed %v after the switch, want %v", got, seqs)
		}
		c := pgstoretest.Claim(t, b.Store, "B")
		got = append(got, pgstoretest.Seqs(c.Records)...)
		pgstoretest.MarkSent(t, b.Store, c)
	}
	if slices.Sort(got); !slices.Equal(got, seqs) {
		t.Errorf("claimed %v after the switch, want each of %v once", got, seqs)
	}
	for _, s := range seqs {
		if r := b.getSeq(t, s); r != outbox.StatusSent {
			t.Errorf("message %d is %s, want SENT", s, r)
		}
	}
}

// getSeq is the status of the message at seq, as Get reads it.
func (b *bundle) getSeq(t *testing.T, seq int64) outbox.Status {
	t.Helper()
	var id [16]byte
	if err := b.Pool.QueryRow(pgstoretest.Context(t), b.SQL("SELECT id FROM {{schema}}.outbox_messages WHERE seq = $1"), seq).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return b.Get(t, id).Status
}

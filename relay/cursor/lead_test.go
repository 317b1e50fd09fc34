package cursor_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgstoretest"
	"github.com/outbox-dev/outbox/relay/cursor"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// The tests of cursor mode's own guarantees; TestConformanceCursor runs the
// store contract on it.

// claimUntil claims (and marks sent) until the seqs in want were all
// claimed, and returns every seq claimed in order; it fails after 10 s.
func claimUntil(t *testing.T, s store.Queue, owner string, want ...int64) []int64 {
	t.Helper()
	var got []int64
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := pgstoretest.Claim(t, s, owner)
		got = append(got, pgstoretest.Seqs(c.Records)...)
		pgstoretest.MarkSent(t, s, c)
		if !slices.ContainsFunc(want, func(w int64) bool { return !slices.Contains(got, w) }) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("claimed %v, still missing some of %v", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// position is the leader's position (in memory).
func position(t *testing.T, s *cursor.Queue) int64 {
	t.Helper()
	leading, pos := s.Leading()
	if !leading {
		t.Fatal("the Cursor does not lead")
	}
	return pos
}

// savedPosition is the position stored in outbox_cursor.
func savedPosition(t *testing.T, b *pgstoretest.Bundle) int64 {
	t.Helper()
	var pos int64
	if err := b.Pool.QueryRow(pgstoretest.Context(t), b.SQL("SELECT position FROM {{schema}}.outbox_cursor")).Scan(&pos); err != nil {
		t.Fatalf("saved position: %v", err)
	}
	return pos
}

// openEnqueue enqueues msgs in a transaction that stays open until the test
// commits or rolls it back.
func openEnqueue(t *testing.T, b *pgstoretest.Bundle, msgs ...outbox.Message) pgx.Tx {
	t.Helper()
	ctx := pgstoretest.Context(t)
	tx, err := b.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	if err := b.Store.Enqueue(ctx, tx, msgs...); err != nil {
		t.Fatal(err)
	}
	return tx
}

func seqOf(t *testing.T, b *pgstoretest.Bundle, tx pgx.Tx, id uuid.UUID) int64 {
	t.Helper()
	var seq int64
	if err := tx.QueryRow(pgstoretest.Context(t), b.SQL("SELECT seq FROM {{schema}}.outbox_messages WHERE id = $1"), id).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	return seq
}

func TestCursor_LateCommitBelowTheHeadIsPublishedAndNotPassed(t *testing.T) {
	b := pgstoretest.SetupCursor(t, pgstore.Config{})
	late := pgstoretest.Msg("Order", "late")
	tx := openEnqueue(t, b, late)
	lateSeq := seqOf(t, b, tx, late.ID)
	after := b.Enqueue(t, pgstoretest.Msg("Order", "other"))
	if after[0] <= lateSeq {
		t.Fatalf("setup: seq %d not above the open transaction's %d", after[0], lateSeq)
	}

	// The committed message goes out; the open one is invisible.
	if got := claimUntil(t, b.Cursor, "A", after[0]); !slices.Equal(got, after) {
		t.Fatalf("claimed %v, want %v", got, after)
	}
	// However long the transaction stays open (past the gap grace of 1 s),
	// the position stays below its seq.
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		pgstoretest.MarkSent(t, b.Cursor, pgstoretest.Claim(t, b.Cursor, "A"))
		if pos := position(t, b.Cursor); pos >= lateSeq {
			t.Fatalf("position %d passed seq %d of a transaction still open", pos, lateSeq)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := tx.Commit(pgstoretest.Context(t)); err != nil {
		t.Fatal(err)
	}
	if got := claimUntil(t, b.Cursor, "A", lateSeq); !slices.Equal(got, []int64{lateSeq}) {
		t.Fatalf("after the late commit claimed %v, want [%d]", got, lateSeq)
	}
	if pos := position(t, b.Cursor); pos < after[0] {
		t.Errorf("position %d after everything was acknowledged, want at least %d", pos, after[0])
	}
}

func TestCursor_RolledBackSeqsStopHoldingThePosition(t *testing.T) {
	b := pgstoretest.SetupCursor(t, pgstore.Config{})
	tx := openEnqueue(t, b, pgstoretest.Msg("Order", "gone"))
	if err := tx.Rollback(pgstoretest.Context(t)); err != nil {
		t.Fatal(err)
	}
	seq := b.Enqueue(t, pgstoretest.Msg("Order", "kept"))
	claimUntil(t, b.Cursor, "A", seq[0])
	if pos := position(t, b.Cursor); pos >= seq[0] {
		t.Fatalf("position %d right after the read, want it below the rolled-back seq %d until the gap closes", pos, seq[0]-1)
	}
	deadline := time.Now().Add(5 * time.Second)
	for position(t, b.Cursor) < seq[0] {
		if time.Now().After(deadline) {
			t.Fatalf("position %d, want it past the rolled-back seq to %d", position(t, b.Cursor), seq[0])
		}
		pgstoretest.MarkSent(t, b.Cursor, pgstoretest.Claim(t, b.Cursor, "A"))
		time.Sleep(50 * time.Millisecond)
	}
}

func TestCursor_LongTransactionHoldsThePositionButNotPublishing(t *testing.T) {
	b := pgstoretest.SetupCursor(t, pgstore.Config{})
	ctx := pgstoretest.Context(t)
	// A transaction with an id that stays open: it holds every snapshot's
	// xmin back, so no gap found after it started can be closed.
	long, err := b.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = long.Rollback(ctx) }()
	if _, err := long.Exec(ctx, "SELECT pg_current_xact_id()"); err != nil {
		t.Fatal(err)
	}
	tx := openEnqueue(t, b, pgstoretest.Msg("Order", "gone"))
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	seq := b.Enqueue(t, pgstoretest.Msg("Order", "kept"))
	// Published at once.
	claimUntil(t, b.Cursor, "A", seq[0])
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		pgstoretest.MarkSent(t, b.Cursor, pgstoretest.Claim(t, b.Cursor, "A"))
		if pos := position(t, b.Cursor); pos >= seq[0] {
			t.Fatalf("position %d passed a gap while a transaction older than it is open", pos)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := long.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(5 * time.Second)
	for position(t, b.Cursor) < seq[0] {
		if time.Now().After(deadline) {
			t.Fatalf("position %d after the long transaction ended, want %d", position(t, b.Cursor), seq[0])
		}
		pgstoretest.MarkSent(t, b.Cursor, pgstoretest.Claim(t, b.Cursor, "A"))
		time.Sleep(50 * time.Millisecond)
	}
}

func TestCursor_StandbyLeadsAfterTheLeaseAndSendsWhatWasNotSaved(t *testing.T) {
	b := pgstoretest.SetupCursor(t, pgstore.Config{CursorSaveInterval: time.Hour})
	standby := b.NewCursor(t, pgstore.Config{})
	seq := b.Enqueue(t, pgstoretest.Msg("Order", "1"), pgstoretest.Msg("Order", "2"))
	c := pgstoretest.Claim(t, b.Cursor, "A")
	if !slices.Equal(pgstoretest.Seqs(c.Records), seq) {
		t.Fatalf("leader claimed %v, want %v", pgstoretest.Seqs(c.Records), seq)
	}
	// A acknowledges the first, which it does not save before it dies.
	if n, err := b.Cursor.MarkSent(pgstoretest.Context(t), c.Token, seq[:1]); err != nil || n != 1 {
		t.Fatalf("MarkSent = %d, %v", n, err)
	}
	b.Cursor.Hang()
	start := time.Now()
	var took store.Claim
	for {
		took = pgstoretest.Claim(t, standby, "B")
		if len(took.Records) > 0 {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("the standby never led")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if waited := time.Since(start); waited < pgstoretest.CursorLease/2 {
		t.Errorf("the standby led after %v, before the leader's lease of %v ended", waited, pgstoretest.CursorLease)
	}
	if !slices.Equal(pgstoretest.Seqs(took.Records), seq) {
		t.Errorf("the new leader claimed %v, want both %v (the first was not saved)", pgstoretest.Seqs(took.Records), seq)
	}
	// The old leader's token changes nothing any more.
	if n, err := b.Cursor.MarkSent(pgstoretest.Context(t), c.Token, seq[1:]); err != nil || n != 0 {
		t.Errorf("old leader's MarkSent = %d, %v; want 0 (fenced)", n, err)
	}
}

// What the leader saved as handled above a gap is not sent again by the
// next leader, whether the leader died (its last periodic save) or
// resigned (the save of Resign; no periodic save runs then).
func TestCursor_StandbyDoesNotResendWhatTheLeaderSavedAsHandledAboveAGap(t *testing.T) {
	for _, c := range []struct {
		name     string
		interval time.Duration
		stop     func(t *testing.T, leader *cursor.Queue)
	}{
		{"the leader died", time.Millisecond, func(t *testing.T, leader *cursor.Queue) {
			// The next round trip saves what was handled; then the leader
			// hangs, and its lease runs out.
			time.Sleep(5 * time.Millisecond)
			pgstoretest.Claim(t, leader, "A")
			leader.Hang()
		}},
		{"the leader resigned", time.Hour, func(t *testing.T, leader *cursor.Queue) {
			if err := leader.Resign(pgstoretest.Context(t)); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := pgstoretest.SetupCursor(t, pgstore.Config{CursorSaveInterval: c.interval})
			standby := b.NewCursor(t, pgstore.Config{})
			// A writer still open below two committed messages: the
			// position stays below its seq however many messages above it
			// are acknowledged.
			late := pgstoretest.Msg("Order", "late")
			tx := openEnqueue(t, b, late)
			lateSeq := seqOf(t, b, tx, late.ID)
			above := b.Enqueue(t, pgstoretest.Msg("Order", "1"), pgstoretest.Msg("Order", "2"))
			if got := claimUntil(t, b.Cursor, "A", above...); !slices.Equal(got, above) {
				t.Fatalf("leader claimed %v, want %v", got, above)
			}
			c.stop(t, b.Cursor)
			if pos := savedPosition(t, b); pos >= lateSeq {
				t.Fatalf("saved position %d passed the open writer's seq %d", pos, lateSeq)
			}
			if err := tx.Commit(pgstoretest.Context(t)); err != nil {
				t.Fatal(err)
			}
			var got []int64
			deadline := time.Now().Add(10 * time.Second)
			for !slices.Contains(got, lateSeq) {
				if time.Now().After(deadline) {
					t.Fatalf("the new leader claimed %v, never the late message %d", got, lateSeq)
				}
				c := pgstoretest.Claim(t, standby, "B")
				got = append(got, pgstoretest.Seqs(c.Records)...)
				pgstoretest.MarkSent(t, standby, c)
				time.Sleep(50 * time.Millisecond)
			}
			if !slices.Equal(got, []int64{lateSeq}) {
				t.Errorf("the new leader claimed %v, want only the late message [%d]: %v were acknowledged and saved as handled", got, lateSeq, above)
			}
			deadline = time.Now().Add(5 * time.Second)
			for position(t, standby) < above[1] {
				if time.Now().After(deadline) {
					t.Fatalf("new leader's position %d, want it to reach %d", position(t, standby), above[1])
				}
				pgstoretest.MarkSent(t, standby, pgstoretest.Claim(t, standby, "B"))
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

func TestCursor_ResignLetsAStandbyLeadAtOnceFromTheSavedPosition(t *testing.T) {
	b := pgstoretest.SetupCursor(t, pgstore.Config{CursorSaveInterval: time.Hour})
	standby := b.NewCursor(t, pgstore.Config{})
	seq := b.Enqueue(t, pgstoretest.Msg("Order", "1"), pgstoretest.Msg("Order", "2"))
	c := pgstoretest.Claim(t, b.Cursor, "A")
	if _, err := b.Cursor.MarkSent(pgstoretest.Context(t), c.Token, seq[:1]); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Cursor.Release(pgstoretest.Context(t), c.Token, seq[1:]); err != nil || n != 1 {
		t.Fatalf("Release = %d, %v", n, err)
	}
	if err := b.Cursor.Resign(pgstoretest.Context(t)); err != nil {
		t.Fatal(err)
	}
	if pos := savedPosition(t, b); pos != seq[0] {
		t.Errorf("saved position after resign = %d, want %d", pos, seq[0])
	}
	start := time.Now()
	got := pgstoretest.Claim(t, standby, "B")
	if !slices.Equal(pgstoretest.Seqs(got.Records), seq[1:]) {
		t.Errorf("standby's first claim after the resign: %v, want %v", pgstoretest.Seqs(got.Records), seq[1:])
	}
	if time.Since(start) > pgstoretest.CursorLease/2 {
		t.Errorf("the standby took %v to lead", time.Since(start))
	}
}

func TestCursor_FailureMovesTheAggregateToTheTablePathInOrder(t *testing.T) {
	b := pgstoretest.SetupCursor(t, pgstore.Config{})
	ctx := pgstoretest.Context(t)
	seq := b.Enqueue(t, pgstoretest.Msg("Order", "a"), pgstoretest.Msg("Order", "a"), pgstoretest.Msg("Order", "b"))
	c := pgstoretest.Claim(t, b.Cursor, "A")
	if !slices.Equal(pgstoretest.Seqs(c.Records), []int64{seq[0], seq[2]}) {
		t.Fatalf("first claim %v, want the heads %d and %d", pgstoretest.Seqs(c.Records), seq[0], seq[2])
	}
	n, err := b.Cursor.MarkFailed(ctx, c.Token, []store.Failure{{Seq: seq[0], Error: "boom", CountAttempt: true, Delay: 300 * time.Millisecond}})
	if err != nil || n != 1 {
		t.Fatalf("MarkFailed = %d, %v", n, err)
	}
	if n, err := b.Cursor.MarkSent(ctx, c.Token, seq[2:]); err != nil || n != 1 {
		t.Fatalf("MarkSent = %d, %v", n, err)
	}
	// A message of a enqueued after the failure also waits behind it.
	later := b.Enqueue(t, pgstoretest.Msg("Order", "a"), pgstoretest.Msg("Order", "b"))
	if r := b.Get(t, b.IDOf(t, seq[0])); r.Status != outbox.StatusFailed || r.Attempts != 1 {
		t.Errorf("failed message: %s, %d attempts; want FAILED, 1", r.Status, r.Attempts)
	}
	var order []int64
	deadline := time.Now().Add(10 * time.Second)
	for len(order) < 4 {
		c := pgstoretest.Claim(t, b.Cursor, "A")
		for _, r := range c.Records {
			order = append(order, r.Seq)
		}
		pgstoretest.MarkSent(t, b.Cursor, c)
		if time.Now().After(deadline) {
			t.Fatalf("claimed %v so far, want 4 messages", order)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var ofA []int64
	for _, s := range order {
		if s != later[1] {
			ofA = append(ofA, s)
		}
	}
	if want := []int64{seq[0], seq[1], later[0]}; !slices.Equal(ofA, want) {
		t.Errorf("aggregate a published as %v, want %v (the failed one first)", ofA, want)
	}
	if order[0] != later[1] {
		t.Errorf("b's new message came at %v; want it first, not held behind a's retry", order)
	}
	for _, s := range []int64{seq[1], later[0]} {
		if r := b.Get(t, b.IDOf(t, s)); r.Status != outbox.StatusSent {
			t.Errorf("seq %d: %s, want SENT through the table path", s, r.Status)
		}
	}
}

func TestCursor_DeadLetterBlocksOnlyItsAggregate(t *testing.T) {
	b := pgstoretest.SetupCursor(t, pgstore.Config{})
	ctx := pgstoretest.Context(t)
	seq := b.Enqueue(t, pgstoretest.Msg("Order", "a"), pgstoretest.Msg("Order", "a"), pgstoretest.Msg("Order", "b"))
	c := pgstoretest.Claim(t, b.Cursor, "A")
	if _, err := b.Cursor.MarkFailed(ctx, c.Token, []store.Failure{{Seq: seq[0], Error: "too large", CountAttempt: true, Dead: true}}); err != nil {
		t.Fatal(err)
	}
	pgstoretest.MarkSent(t, b.Cursor, store.Claim{Token: c.Token, Records: c.Records[1:]})
	later := b.Enqueue(t, pgstoretest.Msg("Order", "b"), pgstoretest.Msg("Order", "a"))
	got := claimUntil(t, b.Cursor, "A", later[0])
	if slices.Contains(got, seq[1]) || slices.Contains(got, later[1]) {
		t.Errorf("claimed %v: a message behind a dead letter went out", got)
	}
	for _, s := range []int64{seq[1], later[1]} {
		if r := b.Get(t, b.IDOf(t, s)); r.Status != outbox.StatusPending {
			t.Errorf("seq %d behind the dead letter: %s, want PENDING", s, r.Status)
		}
	}
}

func TestCursor_EnableKeepsOrderBehindOlderPendingMessages(t *testing.T) {
	b := pgstoretest.Setup(t) // claim mode
	old := b.Enqueue(t, pgstoretest.Msg("Order", "a"))
	if err := b.Store.EnableCursor(pgstoretest.Context(t)); err != nil {
		t.Fatal(err)
	}
	if err := b.Store.EnableCursor(pgstoretest.Context(t)); err != nil {
		t.Fatalf("EnableCursor again: %v", err)
	}
	claimer := b.NewCursor(t, pgstore.Config{})
	newer := b.Enqueue(t, pgstoretest.Msg("Order", "a"), pgstoretest.Msg("Order", "b"))
	var stored string
	if err := b.Pool.QueryRow(pgstoretest.Context(t), b.SQL("SELECT status FROM {{schema}}.outbox_messages WHERE seq = $1"), newer[0]).Scan(&stored); err != nil || stored != "QUEUED" {
		t.Fatalf("a message enqueued after EnableCursor is stored %q (%v), want QUEUED", stored, err)
	}
	first := pgstoretest.Claim(t, claimer, "A")
	if slices.Contains(pgstoretest.Seqs(first.Records), newer[0]) {
		t.Fatalf("first claim %v took a's new message while its older one (%d) is unsent", pgstoretest.Seqs(first.Records), old[0])
	}
	if !slices.Contains(pgstoretest.Seqs(first.Records), old[0]) || !slices.Contains(pgstoretest.Seqs(first.Records), newer[1]) {
		t.Fatalf("first claim %v, want the older message %d (table path) and b's %d", pgstoretest.Seqs(first.Records), old[0], newer[1])
	}
	pgstoretest.MarkSent(t, claimer, first)
	if got := claimUntil(t, claimer, "A", newer[0]); !slices.Contains(got, newer[0]) {
		t.Fatalf("a's new message never claimed: %v", got)
	}
}

func TestCursor_DisableGivesUnsentMessagesBackToClaimMode(t *testing.T) {
	b := pgstoretest.SetupCursor(t, pgstore.Config{CursorSaveInterval: -1})
	ms := []outbox.Message{pgstoretest.Msg("Order", "1"), pgstoretest.Msg("Order", "2")}
	seq := b.Enqueue(t, ms...)
	c := pgstoretest.Claim(t, b.Cursor, "A")
	if _, err := b.Cursor.MarkSent(pgstoretest.Context(t), c.Token, seq[:1]); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Store.DisableCursor(pgstoretest.Context(t)); !errors.Is(err, pgstore.ErrCursorMode) {
		t.Fatalf("DisableCursor while a relay leads: %v, want ErrCursorMode", err)
	}
	if _, err := b.Cursor.Release(pgstoretest.Context(t), c.Token, seq[1:]); err != nil {
		t.Fatal(err)
	}
	if err := b.Cursor.Resign(pgstoretest.Context(t)); err != nil {
		t.Fatal(err)
	}
	moved, err := b.Store.DisableCursor(pgstoretest.Context(t))
	if err != nil || moved != 1 {
		t.Fatalf("DisableCursor = %d, %v; want 1 message moved", moved, err)
	}
	if r := b.Get(t, ms[0].ID); r.Status != outbox.StatusSent {
		t.Errorf("the sent message: %s, want SENT", r.Status)
	}
	if r := b.Get(t, ms[1].ID); r.Status != outbox.StatusPending {
		t.Errorf("the unsent message: %s, want PENDING", r.Status)
	}
	fresh, err := pgstore.New(b.Pool, pgstore.Config{Schema: b.Schema})
	if err != nil {
		t.Fatal(err)
	}
	got := pgstoretest.Claim(t, fresh, "B")
	if !slices.Equal(pgstoretest.Seqs(got.Records), seq[1:]) {
		t.Errorf("claim mode after DisableCursor claimed %v, want %v", pgstoretest.Seqs(got.Records), seq[1:])
	}
	cur := cursor.New(fresh).Queue()
	if _, err := cur.Claim(pgstoretest.Context(t), store.ClaimParams{Owner: "C", Limit: 10, Lease: pgstoretest.CursorLease}); !errors.Is(err, pgstore.ErrNotCursorMode) {
		t.Errorf("a Cursor's claim after DisableCursor = %v, want ErrNotCursorMode", err)
	}
	if leading, _ := cur.Leading(); leading {
		t.Error("a Cursor leads a cursor that was disabled")
	}
}

func TestCursor_EnableRefusesASequenceThatCaches(t *testing.T) {
	b := pgstoretest.Setup(t)
	b.Exec(t, "ALTER SEQUENCE {{schema}}.outbox_messages_seq_seq CACHE 20")
	err := b.Store.EnableCursor(pgstoretest.Context(t))
	if !errors.Is(err, pgstore.ErrCursorMode) {
		t.Fatalf("EnableCursor = %v, want ErrCursorMode", err)
	}
}

func TestCursor_StandbyDoesNotMakeWritersNotify(t *testing.T) {
	b := pgstoretest.SetupCursor(t, pgstore.Config{})
	pgstoretest.Claim(t, b.Cursor, "A") // A leads
	standby := b.NewCursor(t, pgstore.Config{})
	pgstoretest.Claim(t, standby, "B")
	if err := standby.Idle(pgstoretest.Context(t), "B", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := b.Cursor.Idle(pgstoretest.Context(t), "A", time.Minute); err != nil {
		t.Fatal(err)
	}
	rows, err := b.Pool.Query(pgstoretest.Context(t), b.SQL("SELECT relay_id FROM {{schema}}.outbox_idle_relays ORDER BY 1"))
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, []string{"A"}) {
		t.Errorf("registered idle: %v, want only the leader A", ids)
	}
}

// A message that enters the table path below everything the table path's
// claims have seen is claimed again promptly while the cursor keeps
// flowing. (The table path's claims used the claim floor of claim mode: it
// rose with the newest seq, a failed message landed below it, and the claim
// once a second always ran beside the probe below the floor, which the
// claim then overruled: in outbox-lab chaos --cursor --seed 12 an aggregate
// waited minutes behind it.)
func TestCursor_TablePathClaimsAMessageBelowEverythingItSawBefore(t *testing.T) {
	b := pgstoretest.SetupCursor(t, pgstore.Config{})
	ctx := pgstoretest.Context(t)
	flow := func(d time.Duration) {
		deadline := time.Now().Add(d)
		for i := 0; time.Now().Before(deadline); i++ {
			b.Enqueue(t, pgstoretest.Msg("Order", fmt.Sprint("flow-", i)))
			pgstoretest.MarkSent(t, b.Cursor, pgstoretest.Claim(t, b.Cursor, "A"))
			time.Sleep(40 * time.Millisecond)
		}
	}
	seq := b.Enqueue(t, pgstoretest.Msg("Order", "x"), pgstoretest.Msg("Order", "x"))
	c, err := b.Cursor.Claim(ctx, store.ClaimParams{Owner: "A", Limit: 100, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Records) != 1 || c.Records[0].Seq != seq[0] {
		t.Fatalf("first claim %v, want [%d]", pgstoretest.Seqs(c.Records), seq[0])
	}
	// The table path claims for a while, seeing ever higher seqs, before
	// the failure puts x's messages into it.
	flow(2500 * time.Millisecond)
	if n, err := b.Cursor.MarkFailed(ctx, c.Token, []store.Failure{{Seq: seq[0], Error: "retry", CountAttempt: true}}); err != nil || n != 1 {
		t.Fatalf("MarkFailed = %d, %v; want 1", n, err)
	}
	start := time.Now()
	var got []int64
	for !slices.Contains(got, seq[1]) {
		// Due at once, and the failure asks the next claim to look: well
		// within the table path's FullClaimInterval (1 s).
		if time.Since(start) > 1500*time.Millisecond {
			t.Fatalf("x's messages %v not published within 1.5 s of the failure (claimed %v)", seq, got)
		}
		b.Enqueue(t, pgstoretest.Msg("Order", "more"))
		c := pgstoretest.Claim(t, b.Cursor, "A")
		for _, r := range c.Records {
			if r.AggregateID == "x" {
				got = append(got, r.Seq)
			}
		}
		pgstoretest.MarkSent(t, b.Cursor, c)
		time.Sleep(40 * time.Millisecond)
	}
	if !slices.Equal(got, seq) {
		t.Errorf("x published as %v, want %v", got, seq)
	}
}

// An outbox migrated only up to 010 (an older binary's Migrate): claim mode
// runs as before, and cursor mode names the missing migration instead of
// failing on a column.
func TestCursor_AnOutboxBeforeMigration011(t *testing.T) {
	dropColumns := func(t *testing.T, b *pgstoretest.Bundle) {
		t.Helper()
		if _, err := b.Pool.Exec(pgstoretest.Context(t), b.SQL(`ALTER TABLE {{schema}}.outbox_cursor
			DROP COLUMN handled_head, DROP COLUMN unhandled_lo, DROP COLUMN unhandled_hi`)); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("claim mode", func(t *testing.T) {
		b := pgstoretest.Setup(t)
		dropColumns(t, b)
		seq := b.Enqueue(t, pgstoretest.Msg("Order", "1"))
		s, err := pgstore.New(b.Pool, pgstore.Config{Schema: b.Schema})
		if err != nil {
			t.Fatal(err)
		}
		if c := pgstoretest.Claim(t, s, "A"); !slices.Equal(pgstoretest.Seqs(c.Records), seq) {
			t.Errorf("claim mode on an outbox at migration 010 claimed %v, want %v", pgstoretest.Seqs(c.Records), seq)
		}
		err = s.EnableCursor(pgstoretest.Context(t))
		if !errors.Is(err, pgstore.ErrCursorMode) || !strings.Contains(err.Error(), "migration 011") {
			t.Errorf("EnableCursor = %v, want ErrCursorMode naming migration 011", err)
		}
	})
	t.Run("cursor mode", func(t *testing.T) {
		b := pgstoretest.SetupCursor(t, pgstore.Config{})
		dropColumns(t, b)
		s := b.NewCursor(t, pgstore.Config{})
		_, err := s.Claim(pgstoretest.Context(t), store.ClaimParams{Owner: "A", Limit: 10, Lease: pgstoretest.CursorLease})
		if !errors.Is(err, pgstore.ErrCursorMode) || !strings.Contains(err.Error(), "migration 011") {
			t.Errorf("Claim = %v, want ErrCursorMode naming migration 011", err)
		}
	})
}

// An outbox migrated only up to 011: EnableCursor names migration 012 (the
// trigger that makes writers' own INSERTs safe in cursor mode) instead of
// turning cursor mode on without it, and an outbox already in cursor mode
// can still be switched back.
func TestCursor_AnOutboxBeforeMigration012(t *testing.T) {
	dropTrigger := func(t *testing.T, b *pgstoretest.Bundle) {
		t.Helper()
		if _, err := b.Pool.Exec(pgstoretest.Context(t), b.SQL(`DROP TRIGGER outbox_messages_xact_id ON {{schema}}.outbox_messages`)); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("enable", func(t *testing.T) {
		b := pgstoretest.Setup(t)
		dropTrigger(t, b)
		err := b.Store.EnableCursor(pgstoretest.Context(t))
		if !errors.Is(err, pgstore.ErrCursorMode) || !strings.Contains(err.Error(), "migration 012") {
			t.Errorf("EnableCursor = %v, want ErrCursorMode naming migration 012", err)
		}
	})
	t.Run("relay", func(t *testing.T) {
		b := pgstoretest.SetupCursor(t, pgstore.Config{})
		dropTrigger(t, b)
		var logs bytes.Buffer
		s := b.NewCursor(t, pgstore.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		seq := b.Enqueue(t, pgstoretest.Msg("Order", "1"))
		if got := claimUntil(t, s, "A", seq...); !slices.Equal(got, seq) {
			t.Errorf("a relay on an outbox without migration 012 claimed %v, want %v", got, seq)
		}
		if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "migration 012") {
			t.Errorf("no warning naming migration 012 in the relay's log:\n%s", logs.String())
		}
	})
	t.Run("disable", func(t *testing.T) {
		b := pgstoretest.SetupCursor(t, pgstore.Config{})
		dropTrigger(t, b)
		if _, err := b.Store.DisableCursor(pgstoretest.Context(t)); err != nil {
			t.Errorf("DisableCursor without migration 012's trigger: %v", err)
		}
	})
}

func TestCursor_RejectsLeaseBelowOneMillisecond(t *testing.T) {
	b := pgstoretest.SetupCursor(t, pgstore.Config{})
	s := b.Enqueue(t, pgstoretest.Msg("Order", "1"))
	_, err := b.Cursor.Claim(pgstoretest.Context(t), store.ClaimParams{Owner: "A", Limit: 1, Lease: 0})
	pgstoretest.CheckLeaseRejected(t, err)
	if got := claimUntil(t, b.Cursor, "A", s[0]); !slices.Equal(got, s) {
		t.Errorf("claimed %v after the rejected claim, want %v", got, s)
	}
}

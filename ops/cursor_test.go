package ops_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/ops"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/relay/cursor"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// enableCursor turns cursor mode on for b's outbox.
func (b *bundle) enableCursor(t *testing.T) {
	t.Helper()
	if err := b.store.EnableCursor(testCtx(t)); err != nil {
		t.Fatalf("EnableCursor: %v", err)
	}
}

// passCursor moves the cursor's saved position to the seq of id, as the
// leading relay does once it published everything up to that message.
func (b *bundle) passCursor(t *testing.T, id uuid.UUID) {
	t.Helper()
	b.exec(t, "UPDATE {{schema}}.outbox_cursor SET position = (SELECT seq FROM {{schema}}.outbox_messages WHERE id = $1), saved_at = now()", id)
}

// queued enqueues n messages in cursor mode, asserting that they are
// QUEUED.
func (b *bundle) queued(t *testing.T, n int, aggregateType string) []outbox.Message {
	t.Helper()
	ms := nMsgs(n, aggregateType, "Queued")
	b.enqueue(t, ms...)
	for _, m := range ms {
		if s := b.status(t, m.ID); s != "QUEUED" {
			t.Fatalf("a message enqueued in cursor mode is %s, want QUEUED", s)
		}
	}
	return ms
}

func (b *bundle) stats(t *testing.T) ops.Stats {
	t.Helper()
	s, err := b.ops.Stats(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStats_ClaimModeReportsNoCursor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enqueue(t, msg("Order", "1", "OrderPlaced"))
	s := b.stats(t)
	if s.Cursor.Mode != ops.ModeClaim || s.Cursor.Present || s.Cursor.LagMessages != 0 || s.CursorSent != 0 ||
		s.CursorSentLastMinute != 0 {
		t.Errorf("Cursor = %+v, CursorSent %d, CursorSentLastMinute %d; want claim mode and no cursor",
			s.Cursor, s.CursorSent, s.CursorSentLastMinute)
	}
	if s.Counts[outbox.StatusPending] != 1 {
		t.Errorf("PENDING = %d, want 1", s.Counts[outbox.StatusPending])
	}
}

// Stats and Cursor report the mode the outbox records, whichever it is,
// with when it was entered and who switched.
func TestStats_ReportTheRecordedMode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, m := range []ops.Mode{ops.ModeCDC, ops.ModeCursor, ops.ModeClaim} {
		if _, err := b.store.SetMode(testCtx(t), m, "carol"); err != nil {
			t.Fatal(err)
		}
		c, err := b.ops.Cursor(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		s := b.stats(t)
		for what, got := range map[string]ops.CursorState{"Stats": s.Cursor, "Cursor": c} {
			if got.Mode != m || got.ModeBy != "carol" || time.Since(got.ModeSince) > time.Minute {
				t.Errorf("after SetMode(%s): %s reports mode %s since %s by %q", m, what, got.Mode, got.ModeSince, got.ModeBy)
			}
		}
	}
}

// The QUEUED messages above the cursor's position are unsent: they count as
// PENDING, their oldest sets the oldest unsent age, and they are the
// cursor's lag.
func TestStats_CursorMode_UnsentQueuedMessagesArePendingAndSetTheOldestAge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enableCursor(t)
	ms := b.queued(t, 5, "Order")
	b.passCursor(t, ms[1].ID)
	b.exec(t, "UPDATE {{schema}}.outbox_messages SET created_at = now() - interval '1 hour' WHERE id = $1", ms[2].ID)

	s := b.stats(t)
	if s.Counts[outbox.StatusPending] != 3 {
		t.Errorf("PENDING = %d, want the 3 QUEUED messages above the position", s.Counts[outbox.StatusPending])
	}
	if s.OldestUnsentAge < time.Hour || s.OldestUnsentAge > time.Hour+time.Minute {
		t.Errorf("OldestUnsentAge = %s, want about 1h (the first unsent QUEUED message)", s.OldestUnsentAge)
	}
	c := s.Cursor
	if c.Mode != ops.ModeCursor || !c.Present || c.LagMessages != 3 || c.LagAge < time.Hour || c.LagAge > time.Hour+time.Minute {
		t.Errorf("Cursor = %+v, want cursor mode, lag 3, about 1h behind", c)
	}
	if c.SavedAt.IsZero() || c.EnabledAt.IsZero() || c.Leading || c.Leader != "" {
		t.Errorf("Cursor = %+v, want saved and enabled times, and no leader", c)
	}
}

// The QUEUED messages at or below the position are SENT: Counts[SENT]
// includes them, by the statistics' estimate and by an exact count (asked
// for, or because the table is small).
func TestStats_CursorMode_PassedQueuedMessagesAreSent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	claimed := nMsgs(2, "Claim", "OrderPlaced")
	b.enqueue(t, claimed...)
	b.send(t, msgIDs(claimed)...)
	b.enableCursor(t)
	ms := b.queued(t, 6, "Order")
	b.passCursor(t, ms[3].ID)
	exact, err := ops.New(b.pool, ops.Config{Schema: b.schema, ExactSentCount: true})
	if err != nil {
		t.Fatal(err)
	}

	estimated, err := ops.New(b.pool, ops.Config{Schema: b.schema, ExactCountBelow: -1})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("estimate", func(t *testing.T) {
		b.exec(t, "ANALYZE {{schema}}.outbox_messages")
		s, err := estimated.Stats(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if s.Counts[outbox.StatusSent] != 6 || s.CursorSent != 4 || !s.SentEstimated {
			t.Errorf("SENT = %d (estimated %v), CursorSent = %d; want 2 marked + 4 passed by the cursor",
				s.Counts[outbox.StatusSent], s.SentEstimated, s.CursorSent)
		}
	})
	for name, o := range map[string]*ops.Ops{"exact": exact, "small table": b.ops} {
		t.Run(name, func(t *testing.T) {
			s, err := o.Stats(testCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			if s.Counts[outbox.StatusSent] != 6 || s.CursorSent != 4 || s.SentEstimated {
				t.Errorf("SENT = %d (estimated %v), CursorSent = %d; want exactly 2 marked + 4 passed by the cursor",
					s.Counts[outbox.StatusSent], s.SentEstimated, s.CursorSent)
			}
		})
	}
}

// After DisableCursor the cursor row stays: the QUEUED messages it passed
// are still SENT, and the mode is claim again.
func TestStats_AfterDisableCursorPassedQueuedMessagesStaySent(t *testing.T) {
	t.Parallel()
	b := setupWith(t, ops.Config{ExactSentCount: true})
	b.enableCursor(t)
	ms := b.queued(t, 3, "Order")
	b.passCursor(t, ms[1].ID)
	moved, err := b.store.DisableCursor(testCtx(t))
	if err != nil || moved != 1 {
		t.Fatalf("DisableCursor = %d, %v; want 1 moved", moved, err)
	}
	s := b.stats(t)
	if s.Cursor.Mode != ops.ModeClaim || !s.Cursor.Present || s.Cursor.LagMessages != 0 {
		t.Errorf("Cursor = %+v, want claim mode with the (inactive) cursor present and no lag", s.Cursor)
	}
	if s.Counts[outbox.StatusSent] != 2 || s.Counts[outbox.StatusPending] != 1 {
		t.Errorf("Counts = %v, want SENT 2 (passed QUEUED), PENDING 1 (moved back)", s.Counts)
	}
}

// The cursor's leader and its lease are reported, and a lease that ran out
// is not leading.
func TestStats_CursorMode_ReportsTheLeaderAndItsLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enableCursor(t)
	b.exec(t, `UPDATE {{schema}}.outbox_cursor
		SET lease_owner = 'relay-a', lease_token = gen_random_uuid(), lease_expires_at = now() + interval '30 seconds'`)
	c, err := b.ops.Cursor(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if c.Leader != "relay-a" || !c.Leading || c.LeaseExpiresAt.Sub(c.At) < 29*time.Second {
		t.Errorf("Cursor = %+v, want relay-a leading for about 30s", c)
	}
	b.exec(t, "UPDATE {{schema}}.outbox_cursor SET lease_expires_at = now() - interval '1 second'")
	if c = b.stats(t).Cursor; c.Leader != "relay-a" || c.Leading {
		t.Errorf("Cursor = %+v, want relay-a's expired lease, not leading", c)
	}
}

// What the leader saved as handled above the position is reported.
func TestStats_CursorMode_ReportsWhatWasHandledAboveThePosition(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enableCursor(t)
	b.exec(t, `UPDATE {{schema}}.outbox_cursor
		SET position = 10, handled_head = 25, unhandled_lo = '{11,20}', unhandled_hi = '{11,22}'`)
	c, err := b.ops.Cursor(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if c.Position != 10 || c.HandledHead != 25 || c.UnhandledRanges != 2 {
		t.Errorf("Cursor = %+v, want position 10, handled up to 25 but for 2 ranges", c)
	}
	b.exec(t, "UPDATE {{schema}}.outbox_cursor SET position = 30")
	if c = b.stats(t).Cursor; c.HandledHead != 0 || c.UnhandledRanges != 0 {
		t.Errorf("Cursor = %+v, want nothing handled above a position past the saved head", c)
	}
}

// ops reads the messages' states and the cursor through migration 016's
// functions: on an outbox not migrated that far (a binary upgraded before
// "outbox migrate") its errors wrap pgstore.ErrNotMigrated and name the
// missing function and the command that adds it.
func TestOps_BeforeMigration016_SaysToMigrate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, "DROP FUNCTION {{schema}}.outbox_message_states(text[], boolean) CASCADE")
	b.exec(t, "DROP FUNCTION {{schema}}.outbox_cursor_state()")
	ctx := testCtx(t)
	_, statsErr := b.ops.Stats(ctx)
	_, cursorErr := b.ops.Cursor(ctx)
	_, listErr := b.ops.DeadLetters(ctx, ops.Filter{})
	fix := "run 'outbox migrate --schema " + b.ops.Schema() + "'"
	for what, err := range map[string]error{"Stats": statsErr, "Cursor": cursorErr, "DeadLetters": listErr} {
		if !errors.Is(err, pgstore.ErrNotMigrated) || !strings.Contains(err.Error(), "lacks the outbox function outbox_") ||
			!strings.Contains(err.Error(), fix) {
			t.Errorf("%s = %v; want ErrNotMigrated naming the missing function and saying %s", what, err, fix)
		}
	}
}

// The messages the cursor passed count in the last minute's throughput,
// measured against an earlier Stats of the same Ops a minute before; the
// first Stats cannot know it.
func TestStats_CursorMode_SentLastMinuteCountsWhatTheCursorPassed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enableCursor(t)
	before := b.queued(t, 5, "Before")
	b.passCursor(t, before[4].ID)
	if s := b.stats(t); s.CursorSentLastMinute != -1 || s.SentLastMinute != 0 {
		t.Fatalf("first Stats: CursorSentLastMinute %d, SentLastMinute %d; want -1 (unknown) and 0",
			s.CursorSentLastMinute, s.SentLastMinute)
	}
	b.ops.AgeCursorSamples(time.Minute)
	ms := b.queued(t, 30, "Order")
	b.passCursor(t, ms[29].ID)
	s := b.stats(t)
	if s.CursorSentLastMinute != 30 || s.SentLastMinute != 30 {
		t.Errorf("CursorSentLastMinute %d, SentLastMinute %d; want the 30 messages passed in the minute",
			s.CursorSentLastMinute, s.SentLastMinute)
	}
}

// A QUEUED message is not a dead letter: replaying it by id is refused,
// naming the status it has for operators (SENT or PENDING by the cursor),
// and nothing changes.
func TestReplay_QueuedMessageIsRefusedWithItsCursorStatus(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enableCursor(t)
	ms := b.queued(t, 2, "Order")
	b.passCursor(t, ms[0].ID)
	_, err := b.ops.Replay(testCtx(t), ops.Request{Reason: "test", IDs: msgIDs(ms)})
	if !errors.Is(err, ops.ErrNotDeadLetter) || !strings.Contains(err.Error(), ms[0].ID.String()+" (SENT)") ||
		!strings.Contains(err.Error(), ms[1].ID.String()+" (PENDING)") {
		t.Fatalf("Replay = %v, want ErrNotDeadLetter naming one SENT and one PENDING message", err)
	}
	for _, m := range ms {
		if s := b.status(t, m.ID); s != "QUEUED" {
			t.Errorf("%s is %s after the refused replay, want QUEUED", m.ID, s)
		}
	}
}

// Cleanup deletes the QUEUED messages the cursor passed that were created
// before the cutoff, with their attempt history; it keeps old unsent QUEUED
// messages, newer passed ones, and old rows of other statuses.
func TestCleanup_CursorMode_DeletesPassedQueuedMessagesOlderThanTheCutoff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dead := msg("Claim", "dead", "OrderPlaced")
	b.enqueue(t, dead)
	b.fail(t, true, dead.ID, "no")
	b.age(t, dead.ID, 10*24*time.Hour)
	b.enableCursor(t)
	ms := b.queued(t, 6, "Order")
	for _, m := range ms[:4] {
		b.age(t, m.ID, 10*24*time.Hour)
	}
	b.passCursor(t, ms[2].ID) // ms[3] is old but unsent
	b.exec(t, `INSERT INTO {{schema}}.outbox_attempts (seq, message_id, attempt, error, dead)
		SELECT seq, id, 1, 'x', false FROM {{schema}}.outbox_messages WHERE id = $1`, ms[0].ID)
	audits := b.auditCount(t)

	res, err := b.ops.Cleanup(testCtx(t), ops.CleanupConfig{OlderThan: 7 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if res.Queued != 3 || res.Sent != 3 || res.Batches != 1 {
		t.Errorf("Cleanup = %+v, want 3 QUEUED (SENT) messages deleted in one batch", res)
	}
	for i, m := range ms {
		if want := i > 2; b.exists(t, m.ID) != want {
			t.Errorf("message %d exists = %v, want %v", i, !want, want)
		}
	}
	if !b.exists(t, dead.ID) {
		t.Error("the old dead letter was deleted")
	}
	var attempts int
	if err := b.pool.QueryRow(testCtx(t), b.sql("SELECT count(*) FROM {{schema}}.outbox_attempts WHERE message_id = $1"), ms[0].ID).Scan(&attempts); err != nil || attempts != 0 {
		t.Errorf("%d attempt rows of a deleted message left (%v), want 0", attempts, err)
	}
	if got := b.auditCount(t); got != audits+1 {
		t.Errorf("%d audit entries after the cleanup, want %d", got, audits+1)
	}
}

// Cleanup walks the primary key in steps of BatchSize rows and stops at the
// first message created after the cutoff: a passed QUEUED message behind it
// is not reached, whatever its age, and no step deletes more than BatchSize.
func TestCleanup_CursorMode_StopsAtTheFirstMessageCreatedAfterTheCutoff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.enableCursor(t)
	ms := b.queued(t, 8, "Order")
	for i, m := range ms {
		if i != 4 { // the first of the third step: ms[5] is in its step, ms[6] and ms[7] after it
			b.age(t, m.ID, 10*24*time.Hour)
		}
	}
	b.passCursor(t, ms[7].ID)
	var batches []int64
	res, err := b.ops.Cleanup(testCtx(t), ops.CleanupConfig{OlderThan: 7 * 24 * time.Hour, BatchSize: 2,
		OnBatch: func(n int64) { batches = append(batches, n) }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Queued != 4 || !slices.Equal(batches, []int64{2, 2}) {
		t.Errorf("Cleanup = %+v, batches %v; want the 4 messages before the new one, in batches of at most 2", res, batches)
	}
	for i, m := range ms {
		if want := i >= 4; b.exists(t, m.ID) != want {
			t.Errorf("message %d exists = %v, want %v", i, !want, want)
		}
	}
}

// Without cursor mode the cleanup's cursor step finds nothing and changes
// nothing.
func TestCleanup_ClaimModeDeletesNoUnsentMessage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ms := nMsgs(3, "Order", "OrderPlaced")
	b.enqueue(t, ms...)
	for _, m := range ms {
		b.age(t, m.ID, 10*24*time.Hour)
	}
	res, err := b.ops.Cleanup(testCtx(t), ops.CleanupConfig{OlderThan: 7 * 24 * time.Hour})
	if err != nil || res.Sent != 0 || res.Queued != 0 {
		t.Fatalf("Cleanup = %+v, %v; want nothing deleted", res, err)
	}
	for _, m := range ms {
		if !b.exists(t, m.ID) {
			t.Errorf("old PENDING message %s was deleted", m.ID)
		}
	}
}

// Republish sends the QUEUED messages the cursor passed (they are SENT) in
// seq order with the marked SENT ones, and not the QUEUED ones above the
// position.
func TestRepublish_CursorMode_RepublishesPassedQueuedMessagesNotUnsentOnes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	claimed := msg("Order", "c", "OrderPlaced")
	b.enqueue(t, claimed)
	b.send(t, claimed.ID)
	b.enableCursor(t)
	ms := b.queued(t, 4, "Order")
	b.passCursor(t, ms[1].ID)
	snk := &recordingSink{}
	p, err := b.ops.Republish(testCtx(t), ops.RepublishConfig{Name: "rebuild", Since: time.Now().Add(-time.Hour)}, snk)
	if err != nil {
		t.Fatal(err)
	}
	want := []uuid.UUID{claimed.ID, ms[0].ID, ms[1].ID}
	if got := ids(snk.published()); !slices.Equal(got, want) || p.ThisRun != 3 {
		t.Errorf("republished %v (progress %+v), want %v", got, p, want)
	}
	// The records carry the messages' state, as Store.Get has it, not
	// what cursor mode stored.
	for _, r := range snk.published() {
		if r.Status != outbox.StatusSent {
			t.Errorf("republished %s with status %s, want SENT", r.ID, r.Status)
		}
	}
}

// Partition retention counts the QUEUED messages the cursor passed as SENT
// and drops their partition, and keeps a partition that holds a QUEUED
// message above the position (unsent).
func TestMaintainPartitions_CursorMode_KeepsAPartitionWithAnUnsentQueuedMessage(t *testing.T) {
	t.Parallel()
	b := setupPartitioned(t)
	b.enableCursor(t)
	passed := b.queued(t, 3, "A")
	partly := b.queued(t, 3, "B")
	b.passCursor(t, partly[1].ID) // partly[2] is unsent
	for _, m := range passed {
		b.age(t, m.ID, 10*time.Hour)
	}
	for _, m := range partly {
		b.age(t, m.ID, 8*time.Hour)
	}
	res, err := b.ops.MaintainPartitions(testCtx(t), ops.PartitionConfig{OlderThan: 5 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Dropped) != 1 || len(res.Kept) != 1 || res.Kept[0].Unsent != 1 || !strings.Contains(res.Kept[0].Reason, "1 unsent") {
		t.Fatalf("MaintainPartitions = %+v, want the passed messages' partition dropped and the other kept for 1 unsent", res)
	}
	for _, m := range passed {
		if b.exists(t, m.ID) {
			t.Errorf("passed QUEUED message %s survived its partition's drop", m.ID)
		}
	}
	for _, m := range partly {
		if !b.exists(t, m.ID) {
			t.Errorf("message %s of the kept partition is gone", m.ID)
		}
	}
}

// With a real relay leading the cursor, the messages it publishes become
// SENT in the stats while their rows stay QUEUED, the lag drains to zero,
// and the relay is the cursor's leader.
func TestStats_CursorMode_ARelayDrainsTheLag(t *testing.T) {
	t.Parallel()
	b := setupWith(t, ops.Config{ExactSentCount: true})
	b.enableCursor(t)
	ms := b.queued(t, 20, "Order")
	rl, err := relay.New(relay.Config{ID: "relay-under-test", Strategy: cursor.New(b.store), Sink: &recordingSink{},
		PollInterval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if err := rl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rl.Stop(context.Background()) }()
	var s ops.Stats
	for deadline := time.Now().Add(30 * time.Second); ; {
		s = b.stats(t)
		if s.Cursor.LagMessages == 0 && s.Counts[outbox.StatusSent] == 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the relay did not drain the cursor's lag: %+v", s)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if s.Counts[outbox.StatusPending] != 0 || s.OldestUnsentAge != 0 || !s.Cursor.Leading || s.Cursor.Leader != "relay-under-test" {
		t.Errorf("stats after the drain = %+v", s)
	}
	for _, m := range ms {
		if st := b.status(t, m.ID); st != "QUEUED" {
			t.Errorf("a published cursor message is stored as %s, want QUEUED (unchanged)", st)
		}
	}
}

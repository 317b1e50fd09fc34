package ops_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/ops"
	"github.com/outbox-dev/outbox/sink"
)

func TestRepublish_PublishesSentMessagesWithOriginalIDsInSeqOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	old := msg("Order", "0", "OrderPlaced")
	b.enqueue(t, old)
	b.send(t, old.ID)
	b.exec(t, "UPDATE {{schema}}.outbox_messages SET created_at = now() - interval '2 days' WHERE id = $1", old.ID)
	var sent []outbox.Message
	for i := range 5 {
		sent = append(sent, msg("Order", fmt.Sprint(i%2), "OrderPlaced"), msg("Invoice", fmt.Sprint(i), "InvoiceIssued"))
	}
	pending := msg("Order", "9", "OrderPlaced")
	b.enqueue(t, sent...)
	b.enqueue(t, pending)
	b.send(t, msgIDs(sent)...)

	snk := &recordingSink{}
	p, err := b.ops.Republish(testCtx(t), ops.RepublishConfig{Name: "rebuild", Since: time.Now().Add(-24 * time.Hour), BatchSize: 3}, snk)
	if err != nil {
		t.Fatal(err)
	}
	// Only SENT messages since the cutoff, in seq (enqueue) order, with
	// their ids; not the old one, not the pending one.
	if got := ids(snk.published()); !slices.Equal(got, msgIDs(sent)) {
		t.Errorf("republished %v, want %v", got, msgIDs(sent))
	}
	if !p.Finished || p.Published != 10 || p.ThisRun != 10 {
		t.Errorf("progress = %+v", p)
	}
	if s := b.status(t, sent[0].ID); s != outbox.StatusSent {
		t.Errorf("republished message is %s, want SENT (unchanged)", s)
	}
	audit, err := b.ops.Audit(testCtx(t), 1)
	if err != nil || len(audit) != 1 || audit[0].Action != ops.ActionRepublish || audit[0].Count != 10 {
		t.Errorf("audit = %+v, %v", audit, err)
	}

	// Running the finished cursor again publishes nothing.
	p, err = b.ops.Republish(testCtx(t), ops.RepublishConfig{Name: "rebuild", Since: p2since(t, b, "rebuild")}, snk)
	if err != nil || p.ThisRun != 0 || len(snk.published()) != 10 {
		t.Errorf("second run: %+v, %v; published %d in all", p, err, len(snk.published()))
	}
}

// p2since reads a cursor's since back, as a second run would pass it.
func p2since(t *testing.T, b *bundle, name string) time.Time {
	t.Helper()
	var since time.Time
	if err := b.pool.QueryRow(testCtx(t), b.sql("SELECT since FROM {{schema}}.outbox_republish_cursors WHERE name = $1"), name).Scan(&since); err != nil {
		t.Fatal(err)
	}
	return since
}

func TestRepublish_FiltersByAggregateAndEventType(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ms := []outbox.Message{msg("Order", "1", "OrderPlaced"), msg("Order", "1", "OrderPaid"), msg("Invoice", "1", "OrderPlaced")}
	b.enqueue(t, ms...)
	b.send(t, msgIDs(ms)...)
	snk := &recordingSink{}
	_, err := b.ops.Republish(testCtx(t), ops.RepublishConfig{Name: "placed", Since: time.Now().Add(-time.Hour),
		AggregateType: "Order", EventType: "OrderPlaced"}, snk)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(snk.published()); !slices.Equal(got, []uuid.UUID{ms[0].ID}) {
		t.Errorf("republished %v, want only the Order's OrderPlaced", got)
	}
}

func TestRepublish_ResumesAfterAFailureKeepingEachAggregateInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ms []outbox.Message
	for i := range 20 {
		ms = append(ms, msg("Order", fmt.Sprint(i%4), "OrderPlaced"))
	}
	b.enqueue(t, ms...)
	b.send(t, msgIDs(ms)...)

	// The broker refuses the 13th message once; later ones of its batch
	// get through.
	failed := false
	snk := &recordingSink{failAt: func(r outbox.Record) error {
		if r.ID == ms[12].ID && !failed {
			failed = true
			return fmt.Errorf("broker down: %w", sink.ErrUnavailable)
		}
		return nil
	}}
	cfg := ops.RepublishConfig{Name: "resume", Since: time.Now().Add(-time.Hour), BatchSize: 10}
	p, err := b.ops.Republish(testCtx(t), cfg, snk)
	if !errors.Is(err, sink.ErrUnavailable) || p.Finished || p.Published != 12 {
		t.Fatalf("first run: %+v, %v; want stopped after 12 with the publish error", p, err)
	}
	p, err = b.ops.Republish(testCtx(t), cfg, snk)
	if err != nil || !p.Finished || p.Published != 20 || p.ThisRun != 8 {
		t.Fatalf("second run: %+v, %v; want the other 8", p, err)
	}
	// What a consumer that drops duplicates by event id sees: every
	// message, each aggregate in enqueue order.
	seen := map[uuid.UUID]bool{}
	byAggregate := map[string][]uuid.UUID{}
	for _, r := range snk.published() {
		if !seen[r.ID] {
			seen[r.ID] = true
			byAggregate[r.AggregateID] = append(byAggregate[r.AggregateID], r.ID)
		}
	}
	for agg := range 4 {
		var want []uuid.UUID
		for i := agg; i < 20; i += 4 {
			want = append(want, ms[i].ID)
		}
		if got := byAggregate[fmt.Sprint(agg)]; !slices.Equal(got, want) {
			t.Errorf("aggregate %d: consumer sees %v, want %v", agg, got, want)
		}
	}
}

func TestRepublish_StoppedByContextContinuesWhereItStopped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ms := nMsgs(12, "Order", "OrderPlaced")
	b.enqueue(t, ms...)
	b.send(t, msgIDs(ms)...)
	cfg := ops.RepublishConfig{Name: "stop", Since: time.Now().Add(-time.Hour), BatchSize: 4}

	ctx, cancel := context.WithCancel(testCtx(t))
	snk := &recordingSink{}
	cfg.Progress = func(p ops.RepublishProgress) {
		if p.Published >= 4 {
			cancel()
		}
	}
	p, err := b.ops.Republish(ctx, cfg, snk)
	if !errors.Is(err, context.Canceled) || p.Published != 4 {
		t.Fatalf("cancelled run: %+v, %v", p, err)
	}
	cfg.Progress = nil
	p, err = b.ops.Republish(testCtx(t), cfg, snk)
	if err != nil || p.ThisRun != 8 {
		t.Fatalf("resumed run: %+v, %v", p, err)
	}
	if got := ids(snk.published()); !slices.Equal(got, msgIDs(ms)) {
		t.Errorf("published %v, want each once in order", got)
	}
}

func TestRepublish_RateLimits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ms := nMsgs(30, "Order", "OrderPlaced")
	b.enqueue(t, ms...)
	b.send(t, msgIDs(ms)...)
	start := time.Now()
	if _, err := b.ops.Republish(testCtx(t), ops.RepublishConfig{Name: "slow", Since: time.Now().Add(-time.Hour), Rate: 100}, &recordingSink{}); err != nil {
		t.Fatal(err)
	}
	// At 100/s, 30 messages in batches of at most 100 take at least the
	// pause before each batch after the first: here one batch, so check a
	// smaller batch size.
	if _, err := b.ops.Republish(testCtx(t), ops.RepublishConfig{Name: "slower", Since: time.Now().Add(-time.Hour), Rate: 50, BatchSize: 10}, &recordingSink{}); err != nil {
		t.Fatal(err)
	}
	// Batches of 10 at 50/s: the 2nd waits until 0.2s, the 3rd until 0.4s.
	if el := time.Since(start); el < 400*time.Millisecond {
		t.Errorf("30 messages at 50/s in batches of 10 took %s, want at least 0.4s", el)
	}
}

func TestRepublish_ExistingCursorWithOtherParametersIsRefusedUnlessRestarted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ms := nMsgs(3, "Order", "OrderPlaced")
	b.enqueue(t, ms...)
	b.send(t, msgIDs(ms)...)
	since := time.Now().Add(-time.Hour)
	snk := &recordingSink{}
	if _, err := b.ops.Republish(testCtx(t), ops.RepublishConfig{Name: "x", Since: since}, snk); err != nil {
		t.Fatal(err)
	}
	_, err := b.ops.Republish(testCtx(t), ops.RepublishConfig{Name: "x", Since: since, EventType: "Other"}, snk)
	if !errors.Is(err, ops.ErrCursorMismatch) {
		t.Errorf("other parameters: error = %v, want ErrCursorMismatch", err)
	}
	p, err := b.ops.Republish(testCtx(t), ops.RepublishConfig{Name: "x", Since: since, Restart: true}, snk)
	if err != nil || p.ThisRun != 3 || len(snk.published()) != 6 {
		t.Errorf("restart: %+v, %v; published %d in all, want 6", p, err, len(snk.published()))
	}
}

func TestRepublish_InvalidConfigNamesField(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for field, cfg := range map[string]ops.RepublishConfig{
		"Name":  {Name: "no spaces", Since: time.Now()},
		"Since": {Name: "ok"},
		"Rate":  {Name: "ok", Since: time.Now(), Rate: -1},
	} {
		_, err := b.ops.Republish(testCtx(t), cfg, &recordingSink{})
		if !errors.Is(err, ops.ErrInvalidConfig) || !containsWord(err.Error(), field) {
			t.Errorf("%s: error = %v, want ErrInvalidConfig naming it", field, err)
		}
	}
}

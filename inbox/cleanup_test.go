package inbox_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox/inbox"
)

func TestCleanup_DeletesOnlyIdsOlderThanRetention_InBatches(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	ib, err := inbox.New(b.pool, inbox.Config{Schema: b.schema, Retention: 24 * time.Hour, CleanupBatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	var old, recent []uuid.UUID
	for range 5 {
		m := msg()
		if _, err := ib.Handle(ctx, "billing", m, b.applyEffect); err != nil {
			t.Fatal(err)
		}
		old = append(old, m.ID)
	}
	for range 2 {
		m := msg()
		if _, err := ib.Handle(ctx, "billing", m, b.applyEffect); err != nil {
			t.Fatal(err)
		}
		recent = append(recent, m.ID)
	}
	b.exec(t, "UPDATE {{schema}}.inbox_processed SET processed_at = now() - interval '25 hours' WHERE message_id = ANY($1)", old)
	b.exec(t, "UPDATE {{schema}}.inbox_processed SET processed_at = now() - interval '23 hours' WHERE message_id = $1", recent[0])

	n, err := ib.Cleanup(ctx)
	if err != nil || n != 5 {
		t.Fatalf("Cleanup = %d, %v; want 5 deleted in batches of 2", n, err)
	}
	for _, id := range old {
		if b.marked(t, "billing", id) {
			t.Errorf("id %s older than the retention was kept", id)
		}
	}
	for _, id := range recent {
		if !b.marked(t, "billing", id) {
			t.Errorf("id %s within the retention was deleted", id)
		}
	}
	if n, err := ib.Cleanup(ctx); err != nil || n != 0 {
		t.Errorf("second Cleanup = %d, %v; want 0", n, err)
	}
}

// The documented price of a too short retention: a message delivered again
// after its id was deleted is applied again.
func TestCleanup_RedeliveryAfterRetention_IsAppliedAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	m := msg()
	if _, err := b.inbox.Handle(ctx, "billing", m, b.applyEffect); err != nil {
		t.Fatal(err)
	}
	b.exec(t, "UPDATE {{schema}}.inbox_processed SET processed_at = now() - interval '31 days'")
	if n, err := b.inbox.Cleanup(ctx); err != nil || n != 1 {
		t.Fatalf("Cleanup = %d, %v; want 1 (default retention 30 days)", n, err)
	}
	if res, err := b.inbox.Handle(ctx, "billing", m, b.applyEffect); err != nil || res != inbox.Processed {
		t.Fatalf("Handle after cleanup = %v, %v", res, err)
	}
	if n := b.effects(t, m.ID); n != 2 {
		t.Errorf("%d effects, want 2", n)
	}
}

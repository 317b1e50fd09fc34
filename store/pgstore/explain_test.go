package pgstore_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
)

// The claim must not scan the SENT history: with many SENT rows and a small
// backlog, its due-scan uses the partial index outbox_messages_due.
func TestClaim_PlanUsesPartialDueIndex(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	msgs := make([]outbox.Message, 20000)
	for i := range msgs {
		msgs[i] = msg("Order", fmt.Sprint(i%500))
	}
	if err := b.store.Enqueue(ctx, b.pool, msgs...); err != nil {
		t.Fatal(err)
	}
	b.exec(t, "UPDATE {{schema}}.outbox_messages SET status = 'SENT', published_at = now()")
	pending := make([]outbox.Message, 10)
	for i := range pending {
		pending[i] = msg("Order", fmt.Sprint(i))
	}
	b.enqueue(t, pending...)
	b.exec(t, "ANALYZE {{schema}}.outbox_messages")

	rows, err := b.pool.Query(ctx, "EXPLAIN "+b.store.ClaimSQL(), 100, "explain", uuid.New(), int64(60000), int64(0))
	if err != nil {
		t.Fatal(err)
	}
	var plan strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan.String(), "outbox_messages_due") {
		t.Errorf("claim plan does not use outbox_messages_due:\n%s", plan.String())
	}
	if strings.Contains(plan.String(), "Seq Scan") {
		t.Errorf("claim plan scans the table sequentially:\n%s", plan.String())
	}
	t.Logf("claim plan:\n%s", plan.String())
}

// The claim-floor query (in every claim's round trip) looks for the lowest
// due message that does not wait behind a dead letter. With the relay's
// settings and statistics that expect no dead letters, PostgreSQL planned
// that check as one read of every entry of
// outbox_messages_unsent_by_aggregate into a Materialize node: 50,000
// entries and 25 ms for each claim, which cut the bench's drain from 22,000
// to 6,000 messages/s. The check must stay a probe per candidate.
func TestClaimFloor_DeadLetterCheckIsAProbePerCandidate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	msgs := make([]outbox.Message, 20000)
	for i := range msgs {
		msgs[i] = msg("Order", fmt.Sprint(i%2000))
	}
	if err := b.store.Enqueue(ctx, b.pool, msgs...); err != nil {
		t.Fatal(err)
	}
	b.exec(t, "ANALYZE {{schema}}.outbox_messages")

	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, set := range []string{"SET LOCAL enable_seqscan = off", "SET LOCAL enable_bitmapscan = off"} {
		if _, err := tx.Exec(ctx, set); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) "+b.store.ClaimFloorSQL(), int64(100))
	if err != nil {
		t.Fatal(err)
	}
	var plan strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plan.String(), "Materialize") || !strings.Contains(plan.String(), "SubPlan") {
		t.Errorf("the dead-letter check is not a probe per candidate:\n%s", plan.String())
	}
}

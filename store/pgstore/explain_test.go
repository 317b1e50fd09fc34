package pgstore_test

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgstoretest"
)

// sentHistory enqueues n messages over aggs Order aggregates and marks
// those matching where (an SQL condition; "" marks none) SENT.
func (b *bundle) sentHistory(t *testing.T, n, aggs int, where string) {
	t.Helper()
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		msgs[i] = pgstoretest.Msg("Order", fmt.Sprint(i%aggs))
	}
	if err := pgx.BeginFunc(pgstoretest.Context(t), b.Pool, func(tx pgx.Tx) error { return b.Store.Enqueue(pgstoretest.Context(t), tx, msgs...) }); err != nil {
		t.Fatal(err)
	}
	if where != "" {
		b.Exec(t, "UPDATE {{schema}}.outbox_messages SET status = 'SENT', published_at = now() WHERE "+where)
	}
}

// The claim must not scan the SENT history: with many SENT rows and a small
// backlog, its due-scan uses the partial index outbox_messages_due.
func TestClaim_PlanUsesPartialDueIndex(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.sentHistory(t, 20000, 500, "true")
	pending := make([]outbox.Message, 10)
	for i := range pending {
		pending[i] = pgstoretest.Msg("Order", fmt.Sprint(i))
	}
	b.Enqueue(t, pending...)
	b.Exec(t, "ANALYZE {{schema}}.outbox_messages")

	plan := explain(t, b.Pool, "EXPLAIN "+b.Store.ClaimSQL(), 100, "explain", uuid.New(), int64(60000), int64(0), int64(400), "", "")
	if !strings.Contains(plan, "outbox_messages_due") {
		t.Errorf("claim plan does not use outbox_messages_due:\n%s", plan)
	}
	if strings.Contains(plan, "Seq Scan") {
		t.Errorf("claim plan scans the table sequentially:\n%s", plan)
	}
	t.Logf("claim plan:\n%s", plan)
}

// The relay plans its statements once (plan_cache_mode =
// force_generic_plan in relay_settings.sql), and a generic plan does not
// know the claim's LIMIT. Joined with its CTE, the UPDATE was planned for a
// tenth of the table: a merge join over the whole primary key on every
// claim, 680 ms per claim with 175,000 sent rows. The UPDATE must probe the
// primary key per claimed seq in the generic plan too.
func TestClaim_GenericPlanProbesThePrimaryKeyPerSeq(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.sentHistory(t, 40000, 2000, "seq % 2 = 0")
	b.Exec(t, "ANALYZE {{schema}}.outbox_messages")

	tx := b.genericClaim(t, "generic_claim")
	plan := explain(t, tx, "EXPLAIN (COSTS OFF) EXECUTE generic_claim(100, 'explain', '"+uuid.NewString()+"', 60000, 0, 400, '', '')")
	if strings.Contains(plan, "Merge Join") || strings.Contains(plan, "Hash Join") || !strings.Contains(plan, "(seq = ANY") {
		t.Errorf("the generic claim plan does not probe the primary key per claimed seq:\n%s", plan)
	}
	t.Logf("generic claim plan:\n%s", plan)
}

// The claim of runs, planned generically as the relay plans it, finds each
// head's followers by a range scan of outbox_messages_unsent_by_aggregate
// from the head's key (not a walk of the primary key over every later
// message of every aggregate), locks them and leases the claim by a probe
// of the primary key per seq, and scans no table. The backlog sits on a few
// aggregates, so that the claim has room for followers and takes them.
func TestClaimRun_GenericPlanWalksTheAggregateIndexAndProbesThePrimaryKeyPerSeq(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.sentHistory(t, 40000, 10, "seq % 4 <> 0")
	b.Exec(t, "ANALYZE {{schema}}.outbox_messages")

	tx := b.genericClaim(t, "generic_claim")
	if _, err := tx.Exec(pgstoretest.Context(t), "PREPARE generic_run(int, text, uuid, bigint, bigint, bigint, text, text, bigint, bigint) AS "+
		b.Store.ClaimRunSQL()); err != nil {
		t.Fatal(err)
	}
	plan := explain(t, tx, "EXPLAIN (ANALYZE, COSTS OFF) EXECUTE generic_run(100, 'explain', '"+uuid.NewString()+"', 60000, 0, 400, '', '', 50, 0)")
	if !regexp.MustCompile(`Update on outbox_messages m \(actual time=\S+ rows=100 loops=1\)`).MatchString(plan) {
		t.Fatalf("the claim of runs did not claim 100 messages:\n%s", plan)
	}
	walk := regexp.MustCompile(`Index Scan using outbox_messages_unsent_by_aggregate on outbox_messages e_\d+ .*\n\s+Index Cond: \(\(aggregate_type = h_\d+\.aggregate_type\) AND \(ROW\(aggregate_id, seq\) > ROW\(h_\d+\.aggregate_id, h_\d+\.seq\)\)`)
	if !walk.MatchString(plan) {
		t.Errorf("the generic plan of the claim of runs does not walk outbox_messages_unsent_by_aggregate from each head:\n%s", plan)
	}
	// The heads, the followers' locks and the lease: a probe per seq each.
	if strings.Contains(plan, "Seq Scan") || strings.Contains(plan, "Merge Join") || strings.Count(plan, "Index Cond: (seq = ANY") != 3 {
		t.Errorf("the generic plan of the claim of runs does not probe the primary key per seq:\n%s", plan)
	}
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
	ctx := pgstoretest.Context(t)
	b.sentHistory(t, 20000, 2000, "")
	b.Exec(t, "ANALYZE {{schema}}.outbox_messages")

	tx, err := b.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, set := range []string{"SET LOCAL enable_seqscan = off", "SET LOCAL enable_bitmapscan = off"} {
		if _, err := tx.Exec(ctx, set); err != nil {
			t.Fatal(err)
		}
	}
	plan := explain(t, tx, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) "+b.Store.ClaimFloorSQL(), int64(100), int64(math.MaxInt64))
	if strings.Contains(plan, "Materialize") || !strings.Contains(plan, "SubPlan") {
		t.Errorf("the dead-letter check is not a probe per candidate:\n%s", plan)
	}
}

// genericClaim begins a transaction (rolled back at the test's end) with the
// relay's planner settings and the claim prepared as name, planned
// generically as the relay plans it.
func (b *bundle) genericClaim(t *testing.T, name string) pgx.Tx {
	t.Helper()
	ctx := pgstoretest.Context(t)
	tx, err := b.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	for _, set := range []string{"SET LOCAL enable_seqscan = off", "SET LOCAL enable_bitmapscan = off",
		"SET LOCAL plan_cache_mode = force_generic_plan",
		"PREPARE " + name + "(int, text, uuid, bigint, bigint, bigint, text, text) AS " + b.Store.ClaimSQL()} {
		if _, err := tx.Exec(ctx, set); err != nil {
			t.Fatal(err)
		}
	}
	return tx
}

// explain runs an EXPLAIN statement on q and returns the plan's text.
func explain(t *testing.T, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, sql string, args ...any) string {
	t.Helper()
	rows, err := q.Query(pgstoretest.Context(t), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n") + "\n"
}

package sqlitestore_test

import (
	"strings"
	"testing"
)

// queryPlan returns the EXPLAIN QUERY PLAN lines of query.
func queryPlan(t *testing.T, b *bundle, query string, args ...any) string {
	t.Helper()
	rows, err := b.db.QueryContext(testCtx(t), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatalf("explain: %v", err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, notUsed int
		var detail string
		if err := rows.Scan(&id, &parent, &notUsed, &detail); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// The claim must scan the partial index of unsent rows in seq order, and
// probe each aggregate through the partial index of unsent rows by
// aggregate, never the whole table: otherwise its cost grows with the SENT
// rows an outbox accumulates.
func TestClaim_PlanUsesThePartialIndexes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	plan := queryPlan(t, b, b.store.ClaimSQL(), 10, "r", "token", 1000)
	for _, want := range []string{"INDEX outbox_messages_due", "INDEX outbox_messages_unsent_by_aggregate"} {
		if !strings.Contains(plan, want) {
			t.Errorf("claim plan does not use %s:\n%s", want, plan)
		}
	}
	assertNoTableScan(t, plan)
}

// assertNoTableScan fails for a plan step that reads a whole table.
func assertNoTableScan(t *testing.T, plan string) {
	t.Helper()
	for line := range strings.Lines(plan) {
		if strings.HasPrefix(line, "SCAN") && !strings.Contains(line, " USING ") {
			t.Errorf("plan scans a table (%s):\n%s", strings.TrimSpace(line), plan)
		}
	}
}

func TestCleanup_PlanUsesTheSentIndex(t *testing.T) {
	t.Parallel()
	b := setup(t)
	plan := queryPlan(t, b, b.store.CleanupSQL(), 1000, 100)
	if !strings.Contains(plan, "INDEX outbox_messages_sent_by_published_at") {
		t.Errorf("cleanup plan does not use outbox_messages_sent_by_published_at:\n%s", plan)
	}
	assertNoTableScan(t, plan)
}

package sqlitestore_test

import (
	"slices"
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

// Each step of the claim must read the partial indexes (and rows by
// primary key), never a whole table: otherwise its cost grows with the SENT
// rows an outbox accumulates.
func TestClaim_PlanUsesThePartialIndexes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	want := map[string][]string{
		"claim_first_due":    {"SCAN u USING INDEX outbox_messages_due"},
		"claim_by_seq":       {"SEARCH m USING INDEX outbox_messages_due (seq>? AND seq<?)", "SEARCH e USING INDEX outbox_messages_unsent_by_aggregate (aggregate_type=? AND aggregate_id=? AND seq<?)"},
		"claim_beyond":       {"SEARCH u USING INDEX outbox_messages_due (seq>?)"},
		"claim_by_aggregate": {"SEARCH f USING INDEX outbox_messages_unsent_by_aggregate (aggregate_type=? AND aggregate_id>?)", "SEARCH f USING INDEX outbox_messages_unsent_by_aggregate (aggregate_type>?)", "SEARCH e USING INTEGER PRIMARY KEY"},
		"claim_run":          {"SEARCH h USING INTEGER PRIMARY KEY", "SEARCH e USING INDEX outbox_messages_unsent_by_aggregate (aggregate_type=? AND aggregate_id=? AND seq>?)"},
		"claim":              {"SEARCH outbox_messages USING INTEGER PRIMARY KEY"},
	}
	steps := b.store.ClaimSteps()
	if len(steps) != len(want) {
		t.Fatalf("%d claim steps, want %d", len(steps), len(want))
	}
	for _, st := range steps {
		plan := queryPlan(t, b, st.SQL, st.Args...)
		for _, w := range want[st.Name] {
			if !strings.Contains(plan, w) {
				t.Errorf("%s: plan lacks %q:\n%s", st.Name, w, plan)
			}
		}
		// A run's candidates come in the index's order: a sort would read
		// the aggregate's whole backlog before the LIMIT.
		if st.Name == "claim_run" && strings.Contains(plan, "TEMP B-TREE") {
			t.Errorf("%s: plan sorts:\n%s", st.Name, plan)
		}
		// The recursive scan's own rows, the constant row that starts it and
		// the seqs' JSON array are not tables.
		assertNoTableScan(t, plan, "SCAN a", "SCAN CONSTANT ROW", "SCAN json_each VIRTUAL TABLE")
	}
}

// assertNoTableScan fails for a plan step that reads a whole table, except
// steps that start with one of notTables.
func assertNoTableScan(t *testing.T, plan string, notTables ...string) {
	t.Helper()
	for line := range strings.Lines(plan) {
		line := strings.TrimSpace(line)
		if slices.ContainsFunc(notTables, func(p string) bool { return line == p || strings.HasPrefix(line, p+" ") }) {
			continue
		}
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

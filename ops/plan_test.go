package ops_test

import (
	"strings"
	"testing"
)

// Statistics, dead-letter listing, cleanup and republishing must never scan
// the whole table: with a large SENT history and a small backlog, none of
// their plans has a sequential scan of outbox_messages.
func TestQueries_PlansAvoidScanningTheSentHistory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	b.exec(t, `INSERT INTO {{schema}}.outbox_messages
		(id, aggregate_type, aggregate_id, event_type, event_version, payload, content_type, status, created_at, published_at)
		SELECT lpad(to_hex(g), 32, '0')::uuid, 'Order', (g % 1000)::text, 'OrderPlaced', 1, '{}'::bytea, 'application/json',
		       'SENT', now() - interval '30 days', now() - interval '30 days' + g * interval '1 second'
		FROM generate_series(1, 50000) g`)
	ms := nMsgs(20, "Invoice", "InvoiceIssued")
	b.enqueue(t, ms...)
	b.fail(t, true, ms[0].ID, "x")
	b.exec(t, "ANALYZE {{schema}}.outbox_messages")

	for name, q := range b.ops.QueriesForExplain() {
		rows, err := b.pool.Query(ctx, "EXPLAIN "+q.SQL, q.Args...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
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
			t.Fatalf("%s: %v", name, err)
		}
		if strings.Contains(plan.String(), "Seq Scan on outbox_messages") {
			t.Errorf("%s scans outbox_messages sequentially:\n%s", name, plan.String())
		}
	}
}

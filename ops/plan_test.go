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
	b.insertSentHistory(t, 50000)
	ms := nMsgs(20, "Invoice", "InvoiceIssued")
	b.enqueue(t, ms...)
	b.fail(t, true, ms[0].ID, "x")
	b.exec(t, "ANALYZE {{schema}}.outbox_messages")
	b.assertNoSeqScans(t, 50000)
}

// The same in cursor mode, with a long history of QUEUED messages the
// cursor passed (in no partial index) above the claim-mode history, and a
// small lag: the cursor's queries walk the primary key from the position.
func TestQueries_CursorMode_PlansAvoidScanningTheSentHistory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.insertSentHistory(t, 20000)
	b.enableCursor(t)
	b.exec(t, `INSERT INTO {{schema}}.outbox_messages
		(id, aggregate_type, aggregate_id, event_type, event_version, payload, content_type, created_at)
		SELECT gen_random_uuid(), 'Order', (g % 1000)::text, 'OrderPlaced', 1, '{}'::bytea, 'application/json',
		       now() - interval '20 days' + g * interval '1 second'
		FROM generate_series(1, 50000) g`)
	b.exec(t, "UPDATE {{schema}}.outbox_cursor SET position = (SELECT max(seq) FROM {{schema}}.outbox_messages)")
	ms := nMsgs(20, "Invoice", "InvoiceIssued")
	b.enqueue(t, ms...)
	b.exec(t, "ANALYZE {{schema}}.outbox_messages")
	c, err := b.ops.Cursor(testCtx(t))
	if err != nil || c.LagMessages != 20 {
		t.Fatalf("Cursor = %+v, %v; want a lag of 20", c, err)
	}
	b.assertNoSeqScans(t, c.Position)
}

// insertSentHistory writes n SENT messages of a month ago.
func (b *bundle) insertSentHistory(t *testing.T, n int) {
	t.Helper()
	b.exec(t, `INSERT INTO {{schema}}.outbox_messages
		(id, aggregate_type, aggregate_id, event_type, event_version, payload, content_type, status, created_at, published_at)
		SELECT lpad(to_hex(g), 32, '0')::uuid, 'Order', (g % 1000)::text, 'OrderPlaced', 1, '{}'::bytea, 'application/json',
		       'SENT', now() - interval '30 days', now() - interval '30 days' + g * interval '1 second'
		FROM generate_series(1, $1::int) g`, n)
}

// assertNoSeqScans fails the test for every statement of ops whose plan
// scans outbox_messages sequentially, with the cursor at position.
func (b *bundle) assertNoSeqScans(t *testing.T, position int64) {
	t.Helper()
	ctx := testCtx(t)
	for name, q := range b.ops.QueriesForExplain(position) {
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

// Behind a large backlog of pending messages, listing and grouping the few
// dead letters reads them through their own index, not the backlog.
func TestQueries_DeadLettersBehindABacklog_ReadOnlyTheDeadLetters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ms := nMsgs(5, "Invoice", "InvoiceIssued")
	b.enqueue(t, ms...)
	b.fail(t, true, ms[0].ID, "x")
	b.exec(t, `INSERT INTO {{schema}}.outbox_messages
		(id, aggregate_type, aggregate_id, event_type, event_version, payload, content_type)
		SELECT gen_random_uuid(), 'Order', (g % 1000)::text, 'OrderPlaced', 1, '{}'::bytea, 'application/json'
		FROM generate_series(1, 50000) g`)
	b.exec(t, "ANALYZE {{schema}}.outbox_messages")
	ctx := testCtx(t)
	for name, q := range b.ops.QueriesForExplain(0) {
		if !strings.HasPrefix(name, "dlq_") {
			continue
		}
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
		if !strings.Contains(plan.String(), "outbox_messages_dead") {
			t.Errorf("%s does not read the dead letters through outbox_messages_dead:\n%s", name, plan.String())
		}
	}
}

package ops_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox/ops"
	"github.com/outbox-dev/outbox/store/pgstore"
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
	b.assertNoSeqScansOf(t, position, "outbox_messages")
}

// assertNoSeqScansOf fails the test for every statement of ops whose plan
// scans one of tables sequentially (a name, or the start of names),
// with the cursor at position.
func (b *bundle) assertNoSeqScansOf(t *testing.T, position int64, tables ...string) {
	t.Helper()
	for name, q := range b.ops.QueriesForExplain(position) {
		plan := explainPlan(t, b, q.SQL, q.Args...)
		for _, table := range tables {
			if strings.Contains(plan, "Seq Scan on "+table) {
				t.Errorf("%s scans %s sequentially:\n%s", name, table, plan)
			}
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
	for name, q := range b.ops.QueriesForExplain(0) {
		if !strings.HasPrefix(name, "dlq_") {
			continue
		}
		if plan := explainPlan(t, b, q.SQL, q.Args...); !strings.Contains(plan, "outbox_messages_dead") {
			t.Errorf("%s does not read the dead letters through outbox_messages_dead:\n%s", name, plan)
		}
	}
}

// On a time-partitioned table the same statements read each partition
// through its indexes, and the retention check of one partition reads that
// partition only, through its indexes: the states' function follows the
// table that Migrate partitioned.
func TestQueries_Partitioned_PlansStayOnIndexes(t *testing.T) {
	t.Parallel()
	b := setupPartitioned(t)
	// Two hours of SENT history, 20,000 messages an hour, written to the
	// default partition and moved to partitions of their own by
	// MaintainPartitions, and a small backlog with a dead letter.
	b.exec(t, `INSERT INTO {{schema}}.outbox_messages
		(id, aggregate_type, aggregate_id, event_type, event_version, payload, content_type, status, created_at, published_at)
		SELECT gen_random_uuid(), 'Order', (g % 1000)::text, 'OrderPlaced', 1, '{}'::bytea, 'application/json', 'SENT',
		       date_trunc('hour', now()) - interval '3 hours' + g * interval '360 milliseconds',
		       date_trunc('hour', now()) - interval '3 hours' + g * interval '360 milliseconds'
		FROM generate_series(1, 40000) g`)
	if _, err := b.ops.MaintainPartitions(testCtx(t), ops.PartitionConfig{}); err != nil {
		t.Fatal(err)
	}
	ms := nMsgs(20, "Invoice", "InvoiceIssued")
	b.enqueue(t, ms...)
	b.fail(t, true, ms[0].ID, "x")
	b.exec(t, "ANALYZE {{schema}}.outbox_messages")
	ps, err := b.store.Partitions(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	// The history's partitions; the others hold a few rows or none, and
	// PostgreSQL rightly reads those whole.
	var history []string
	var old pgstore.Partition
	for _, p := range ps {
		if !p.Default && !p.To.IsZero() && p.To.Before(time.Now().Add(-time.Hour)) {
			history = append(history, p.Name+" ")
			old = p
		}
	}
	if len(history) < 2 {
		t.Fatalf("the history is not in partitions of its own: %+v", ps)
	}
	b.assertNoSeqScansOf(t, 0, history...)

	sql, args := b.ops.PartitionCheckForExplain(old)
	plan := explainPlan(t, b, sql, args...)
	for _, p := range ps {
		if p.Name != old.Name && strings.Contains(plan, p.Name+" ") {
			t.Errorf("the check of %s reads %s too:\n%s", old.Name, p.Name, plan)
		}
	}
	if !strings.Contains(plan, old.Name) || strings.Contains(plan, "Seq Scan") {
		t.Errorf("the check of %s does not read it through its indexes:\n%s", old.Name, plan)
	}
}

// explainPlan returns the plan of sql with args; a failed EXPLAIN fails
// the test.
func explainPlan(t *testing.T, b *bundle, sql string, args ...any) string {
	t.Helper()
	rows, err := b.pool.Query(testCtx(t), "EXPLAIN "+sql, args...)
	if err != nil {
		t.Fatalf("EXPLAIN: %v\n%s", err, sql)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n") + "\n"
}

package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox/internal/pgtest"
)

// opsFixture is a migrated outbox in the test's own schema, for the
// operations commands.
type opsFixture struct {
	pool   *pgxpool.Pool
	schema string
	env    map[string]string
}

func newOpsFixture(t testing.TB) *opsFixture {
	t.Helper()
	pool, schema := pgtest.Schema(t)
	f := &opsFixture{pool: pool, schema: schema,
		env: map[string]string{"OUTBOX_DATABASE_URL": pgtest.URL(), "OUTBOX_SCHEMA": schema, "OUTBOX_LOG_LEVEL": "warn"}}
	if res := runCLI(t, f.env, "migrate"); res.code != exitOK {
		t.Fatalf("migrate: exit %d, stderr:\n%s", res.code, res.stderr)
	}
	return f
}

// The ids of the seeded messages.
const (
	seedDeadID    = "0190a1c2-7f3e-7c2a-9d4e-1b2c3d4e5f60" // Order/42, blocks one PENDING message
	seedDead2ID   = "0190a1c2-7f3e-7c2a-9d4e-1b2c3d4e5f61" // Invoice/7, alone
	seedPendingID = "0190a1c2-7f3e-7c2a-9d4e-1b2c3d4e5f62" // Order/42, behind the dead letter
)

// seed writes a small outbox: two dead letters (one with attempt history
// and a message, an hour old, waiting behind it), a FAILED message, three SENT messages
// published 10 days ago and one sent now.
func (f *opsFixture) seed(t testing.TB) {
	t.Helper()
	f.exec(t, `INSERT INTO {{schema}}.outbox_messages
		(id, aggregate_type, aggregate_id, event_type, event_version, payload, content_type, headers, status, attempts, last_error, published_at, created_at)
		VALUES
		('`+seedDeadID+`', 'Order', '42', 'OrderPlaced', 1, '{"orderId":"42","amount":"150.00"}', 'application/json', '{"tenant":"acme"}',
		 'DEAD_LETTER', 2, 'UNKNOWN_TOPIC_OR_PARTITION: topic orders does not exist', NULL, now() - interval '2 hours'),
		('`+seedDead2ID+`', 'Invoice', '7', 'InvoiceIssued', 1, '{}', 'application/json', '{}', 'DEAD_LETTER', 1, 'MESSAGE_TOO_LARGE', NULL, now()),
		('`+seedPendingID+`', 'Order', '42', 'OrderPaid', 1, '{}', 'application/json', '{}', 'PENDING', 0, '', NULL, now() - interval '1 hour'),
		(gen_random_uuid(), 'Order', '43', 'OrderPaid', 1, '{}', 'application/json', '{}', 'FAILED', 1, 'timeout', NULL, now()),
		(gen_random_uuid(), 'Order', '1', 'OrderPlaced', 1, '{}', 'application/json', '{}', 'SENT', 0, '', now() - interval '10 days', now() - interval '10 days'),
		(gen_random_uuid(), 'Order', '2', 'OrderPlaced', 1, '{}', 'application/json', '{}', 'SENT', 0, '', now() - interval '10 days', now() - interval '10 days'),
		(gen_random_uuid(), 'Order', '3', 'OrderPlaced', 1, '{}', 'application/json', '{}', 'SENT', 0, '', now() - interval '10 days', now() - interval '10 days'),
		(gen_random_uuid(), 'Order', '4', 'OrderPlaced', 1, '{}', 'application/json', '{}', 'SENT', 0, '', now(), now())`)
	f.exec(t, `INSERT INTO {{schema}}.outbox_attempts (seq, message_id, attempt, error, dead)
		SELECT seq, id, n, CASE n WHEN 1 THEN 'request timed out' ELSE last_error END, n = 2
		FROM {{schema}}.outbox_messages, generate_series(1, 2) n
		WHERE id = '`+seedDeadID+`'`)
	f.exec(t, "ANALYZE {{schema}}.outbox_messages")
}

func (f *opsFixture) exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := f.pool.Exec(ctx, f.sql(sql), args...); err != nil {
		t.Fatalf("exec %q: %v", sql, err)
	}
}

func (f *opsFixture) sql(s string) string {
	return strings.ReplaceAll(s, "{{schema}}", pgx.Identifier{f.schema}.Sanitize())
}

func (f *opsFixture) queryInt(t testing.TB, sql string, args ...any) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var n int
	if err := f.pool.QueryRow(ctx, f.sql(sql), args...).Scan(&n); err != nil {
		t.Fatalf("query %q: %v", sql, err)
	}
	return n
}

func (f *opsFixture) status(t testing.TB, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var s string
	if err := f.pool.QueryRow(ctx, f.sql("SELECT status FROM {{schema}}.outbox_messages WHERE id = $1"), id).Scan(&s); err != nil {
		t.Fatalf("status of %s: %v", id, err)
	}
	return s
}

func (f *opsFixture) run(t testing.TB, args ...string) cliResult {
	t.Helper()
	return runCLI(t, f.env, args...)
}

// mustRun runs the command and fails the test unless it exits with want.
func (f *opsFixture) mustRun(t testing.TB, want int, args ...string) cliResult {
	t.Helper()
	res := f.run(t, args...)
	if res.code != want {
		t.Fatalf("outbox %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), res.code, want, res.stdout, res.stderr)
	}
	return res
}

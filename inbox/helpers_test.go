package inbox_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox/inbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
)

// bundle is what most tests need: a migrated inbox in the test's own
// schema, and a business table "effects" in the same schema.
type bundle struct {
	pool   *pgxpool.Pool
	schema string
	inbox  *inbox.Inbox
}

func setup(t *testing.T) *bundle {
	t.Helper()
	pool, schema := pgtest.Schema(t)
	ib, err := inbox.New(pool, inbox.Config{Schema: schema})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := ib.Migrate(testCtx(t)); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	b := &bundle{pool: pool, schema: schema, inbox: ib}
	b.exec(t, `CREATE TABLE {{schema}}.effects (
		n          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		message_id uuid   NOT NULL,
		note       text   NOT NULL DEFAULT ''
	)`)
	return b
}

// testCtx is a context that ends with the test, bounded to 30 s.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// msg returns a message with a fresh id, as FromRecord would read it.
func msg() inbox.Message {
	id := uuid.New()
	return inbox.Message{
		ID: id, EventType: "OrderPlaced", EventVersion: 1, AggregateType: "Order", AggregateID: "o-1",
		Headers: map[string]string{"eventId": id.String(), "eventType": "OrderPlaced", "aggregateType": "Order"},
		Payload: []byte(`{"orderId":"o-1"}`),
		Topic:   "orders", Partition: 2, Offset: 41,
	}
}

// sql replaces {{schema}} with the quoted test schema.
func (b *bundle) sql(s string) string {
	return strings.ReplaceAll(s, "{{schema}}", pgx.Identifier{b.schema}.Sanitize())
}

func (b *bundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := b.pool.Exec(testCtx(t), b.sql(sql), args...); err != nil {
		t.Fatalf("exec %q: %v", sql, err)
	}
}

func (b *bundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(testCtx(t), b.sql(sql), args...).Scan(&n); err != nil {
		t.Fatalf("count %q: %v", sql, err)
	}
	return n
}

// effects counts the effect rows of a message.
func (b *bundle) effects(t *testing.T, id uuid.UUID) int {
	t.Helper()
	return b.count(t, "SELECT count(*) FROM {{schema}}.effects WHERE message_id = $1", id)
}

// marked reports whether consumer has recorded the message as processed.
func (b *bundle) marked(t *testing.T, consumer string, id uuid.UUID) bool {
	t.Helper()
	return b.count(t, "SELECT count(*) FROM {{schema}}.inbox_processed WHERE consumer = $1 AND message_id = $2",
		consumer, id) == 1
}

// applyEffect is a handler that writes one effect row.
func (b *bundle) applyEffect(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
	_, err := tx.Exec(ctx, b.sql("INSERT INTO {{schema}}.effects (message_id) VALUES ($1)"), m.ID)
	return err
}

// nopHandler applies nothing.
func nopHandler(context.Context, pgx.Tx, inbox.Message) error { return nil }

package ops_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/ops"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// bundle is a migrated outbox in the test's own schema, with its tools.
type bundle struct {
	pool   *pgxpool.Pool
	schema string
	store  *pgstore.Store
	ops    *ops.Ops
}

func setup(t *testing.T) *bundle {
	t.Helper()
	return setupWith(t, ops.Config{})
}

func setupWith(t *testing.T, cfg ops.Config) *bundle {
	t.Helper()
	pool, schema := pgtest.Schema(t)
	st, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	cfg.Schema = schema
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	o, err := ops.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{pool: pool, schema: schema, store: st, ops: o}
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func msg(aggregateType, aggregateID, eventType string) outbox.Message {
	return outbox.Message{
		ID:            uuid.New(),
		AggregateType: aggregateType,
		AggregateID:   aggregateID,
		EventType:     eventType,
		Payload:       []byte(`{"n":1}`),
	}
}

// enqueue commits msgs in one transaction.
func (b *bundle) enqueue(t *testing.T, msgs ...outbox.Message) {
	t.Helper()
	ctx := testCtx(t)
	if err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error { return b.store.Enqueue(ctx, tx, msgs...) }); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
}

// claimAll claims every due head (one claim).
func (b *bundle) claimAll(t *testing.T) store.Claim {
	t.Helper()
	c, err := b.store.Claim(testCtx(t), store.ClaimParams{Owner: "test", Limit: 1000, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fail claims the heads and fails those with the given ids as the relay
// would: errs[i] becomes the error; the last one dead-letters the message
// when dead. Messages claimed but not named are released.
func (b *bundle) fail(t *testing.T, dead bool, id uuid.UUID, errs ...string) {
	t.Helper()
	ctx := testCtx(t)
	for i, e := range errs {
		c := b.claimAll(t)
		var seq int64 = -1
		var others []int64
		for _, r := range c.Records {
			if r.ID == id {
				seq = r.Seq
			} else {
				others = append(others, r.Seq)
			}
		}
		if seq < 0 {
			t.Fatalf("message %s was not claimable (attempt %d)", id, i+1)
		}
		last := i == len(errs)-1
		if _, err := b.store.MarkFailed(ctx, c.Token, []store.Failure{{Seq: seq, Error: e, CountAttempt: true, Dead: dead && last}}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.store.Release(ctx, c.Token, others); err != nil {
			t.Fatal(err)
		}
		// Make the retry due at once.
		b.exec(t, "UPDATE {{schema}}.outbox_messages SET next_attempt_at = now() WHERE id = $1 AND status = 'FAILED'", id)
	}
}

// send marks the messages with the ids SENT through claims.
func (b *bundle) send(t *testing.T, ids ...uuid.UUID) {
	t.Helper()
	want := map[uuid.UUID]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for range 100 {
		if len(want) == 0 {
			return
		}
		c := b.claimAll(t)
		var sent, others []int64
		for _, r := range c.Records {
			if want[r.ID] {
				sent = append(sent, r.Seq)
				delete(want, r.ID)
			} else {
				others = append(others, r.Seq)
			}
		}
		if _, err := b.store.MarkSent(testCtx(t), c.Token, sent); err != nil {
			t.Fatal(err)
		}
		if _, err := b.store.Release(testCtx(t), c.Token, others); err != nil {
			t.Fatal(err)
		}
		if len(sent) == 0 {
			break
		}
	}
	if len(want) > 0 {
		t.Fatalf("could not send %d messages", len(want))
	}
}

func (b *bundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := b.pool.Exec(testCtx(t), b.sql(sql), args...); err != nil {
		t.Fatalf("exec %q: %v", sql, err)
	}
}

func (b *bundle) sql(s string) string {
	return strings.ReplaceAll(s, "{{schema}}", pgx.Identifier{b.schema}.Sanitize())
}

func (b *bundle) get(t *testing.T, id uuid.UUID) outbox.Record {
	t.Helper()
	r, err := b.store.Get(testCtx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (b *bundle) status(t *testing.T, id uuid.UUID) outbox.Status {
	t.Helper()
	var s string
	if err := b.pool.QueryRow(testCtx(t), b.sql("SELECT status FROM {{schema}}.outbox_messages WHERE id = $1"), id).Scan(&s); err != nil {
		t.Fatalf("status of %s: %v", id, err)
	}
	return outbox.Status(s)
}

func (b *bundle) auditCount(t *testing.T) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(testCtx(t), b.sql("SELECT count(*) FROM {{schema}}.outbox_audit")).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// recordingSink records what it publishes; failAt, if set, decides per
// record whether to refuse it.
type recordingSink struct {
	mu     sync.Mutex
	recs   []outbox.Record
	failAt func(rec outbox.Record) error
}

func (s *recordingSink) Publish(_ context.Context, recs []outbox.Record) []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	errs := make([]error, len(recs))
	for i, r := range recs {
		if s.failAt != nil {
			if errs[i] = s.failAt(r); errs[i] != nil {
				continue
			}
		}
		s.recs = append(s.recs, r)
	}
	return errs
}

func (s *recordingSink) Close() error { return nil }

func (s *recordingSink) published() []outbox.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]outbox.Record(nil), s.recs...)
}

func ids(recs []outbox.Record) []uuid.UUID {
	out := make([]uuid.UUID, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

func msgIDs(msgs []outbox.Message) []uuid.UUID {
	out := make([]uuid.UUID, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

func nMsgs(n int, aggregateType, eventType string) []outbox.Message {
	out := make([]outbox.Message, n)
	for i := range out {
		out[i] = msg(aggregateType, fmt.Sprint(i), eventType)
	}
	return out
}

func containsWord(s, w string) bool { return strings.Contains(s, w) }

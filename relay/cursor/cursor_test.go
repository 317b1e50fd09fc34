package cursor_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgstoretest"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/relay/cursor"
	"github.com/outbox-dev/outbox/relay/strategy"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// outboxIn returns a migrated store in a schema of its own, in cursor mode
// when cursorMode.
func outboxIn(t *testing.T, cursorMode bool) *pgstore.Store {
	t.Helper()
	st := pgstoretest.Setup(t).Store
	if cursorMode {
		if err := st.EnableCursor(pgstoretest.Context(t)); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// enqueue commits one message of each aggregate id.
func enqueue(t *testing.T, st *pgstore.Store, pool *pgxpool.Pool, ids ...string) {
	t.Helper()
	ctx := context.Background()
	var msgs []outbox.Message
	for _, id := range ids {
		msgs = append(msgs, outbox.Message{AggregateType: "Order", AggregateID: id, EventType: "Placed", Payload: []byte(`{}`)})
	}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return st.Enqueue(ctx, tx, msgs...) }); err != nil {
		t.Fatal(err)
	}
}

// The leader marks in memory: MarkSent with next marks alone, without
// lingering, and returns no claim. A standby's MarkSent with next lingers,
// then marks its table-path messages and claims the next batch in one call.
// Close hands the lead over.
func TestStrategy_MarkSentClaimsWithTheMarkUnlessTheLeaderMarksInMemory(t *testing.T) {
	t.Parallel()
	st := outboxIn(t, true)
	pool := pgtest.Pool(t, st.Schema())
	ctx := context.Background()
	p := store.ClaimParams{Owner: "A", Limit: 10, Lease: time.Minute}
	lingered := 0
	next := &strategy.Next{Params: p, Linger: func() bool { lingered++; return true }}

	leader := cursor.New(st)
	enqueue(t, st, pool, "1", "2")
	c, err := leader.Claim(ctx, p)
	if err != nil || len(c.Records) != 2 {
		t.Fatalf("the leader's claim = %v, %v; want both messages", pgstoretest.Seqs(c.Records), err)
	}
	n, claimed, err := leader.MarkSent(ctx, c.Token, pgstoretest.Seqs(c.Records), next)
	if err != nil || n != 2 || claimed != nil || lingered != 0 {
		t.Fatalf("the leader's MarkSent = %d, %v, %v, lingered %d times; want 2 marked in memory, no claim, no linger",
			n, claimed, err, lingered)
	}

	// A message in the table path (PENDING, as one written before cursor
	// mode), for a standby to claim.
	enqueue(t, st, pool, "3")
	if _, err := pool.Exec(ctx, "UPDATE outbox_messages SET status = 'PENDING' WHERE seq = (SELECT max(seq) FROM outbox_messages)"); err != nil {
		t.Fatal(err)
	}
	standby := cursor.New(st)
	var table store.Claim
	for deadline := time.Now().Add(10 * time.Second); len(table.Records) == 0; time.Sleep(50 * time.Millisecond) {
		if table, err = standby.Claim(ctx, store.ClaimParams{Owner: "B", Limit: 10, Lease: time.Minute}); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the standby claimed nothing from the table path")
		}
	}
	n, claimed, err = standby.MarkSent(ctx, table.Token, pgstoretest.Seqs(table.Records), next)
	if err != nil || n != int64(len(table.Records)) || claimed == nil || lingered != 1 {
		t.Fatalf("the standby's MarkSent = %d, %v, %v, lingered %d times; want %d marked, a claim, one linger",
			n, claimed, err, lingered, len(table.Records))
	}

	if err := leader.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := standby.Claim(ctx, p); err != nil {
			t.Fatal(err)
		}
		if standby.MarksInMemory() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the standby does not lead after the leader closed")
		}
	}
	if err := standby.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// On an outbox in claim mode the strategy claims nothing: its Claim and
// MarkSent with next fail with ErrNotCursorMode.
func TestStrategy_RefusesAnOutboxInClaimMode(t *testing.T) {
	t.Parallel()
	st := outboxIn(t, false)
	ctx := context.Background()
	p := store.ClaimParams{Owner: "A", Limit: 10, Lease: time.Minute}
	s := cursor.New(st)
	if c, err := s.Claim(ctx, p); !errors.Is(err, pgstore.ErrNotCursorMode) || len(c.Records) != 0 {
		t.Errorf("Claim in claim mode = %v, %v; want ErrNotCursorMode", pgstoretest.Seqs(c.Records), err)
	}
	_, claimed, err := s.MarkSent(ctx, [16]byte{1}, []int64{1}, &strategy.Next{Params: p, Linger: func() bool { return true }})
	if !errors.Is(err, pgstore.ErrNotCursorMode) || claimed != nil {
		t.Errorf("MarkSent with next in claim mode = %v, %v; want ErrNotCursorMode", claimed, err)
	}
	if err := s.Close(ctx); err != nil {
		t.Errorf("Close of a strategy that never led = %v, want nil", err)
	}
	if s.Wakeups() == nil {
		t.Error("Wakeups is nil")
	}
}

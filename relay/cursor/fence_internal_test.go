package cursor

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// The database's fence of the leader's writes: a leader whose lease
// another relay took over may have writes under way that it planned while
// it still led (it hung between planning and sending, say). Its local
// check cannot stop those; its lease token does.

// fenceMsg is a message of aggregate Order/id.
func fenceMsg(id string) outbox.Message {
	return outbox.Message{ID: uuid.New(), AggregateType: "Order", AggregateID: id, EventType: "Happened", Payload: []byte(`{}`)}
}

// fenceEnqueue commits m with s and returns its seq.
func fenceEnqueue(t *testing.T, s *pgstore.Store, pool *pgxpool.Pool, m outbox.Message) int64 {
	t.Helper()
	ctx := context.Background()
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return s.Enqueue(ctx, tx, m) }); err != nil {
		t.Fatal(err)
	}
	r, err := s.Get(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	return r.Seq
}

// cursorRowVersion is the cursor row as text, with its row version (xmin), which
// changes with every write of the row, even one that sets the same values.
func cursorRowVersion(t *testing.T, pool *pgxpool.Pool, schema string) string {
	t.Helper()
	var v string
	q := "SELECT c.xmin::text || ' ' || row_to_json(c)::text FROM " + pgx.Identifier{schema}.Sanitize() + ".outbox_cursor c"
	if err := pool.QueryRow(context.Background(), q).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// A leads and plans a round trip that saves its position and moves a
// message to the table path; then it hangs (no renewal), its lease ends
// and B takes the lead. When A resumes, the renewal it had due and the
// round trip it had planned reach the database under its old token: they
// change no row of the cursor (not its position, saved_at, handled ranges
// or lease) and move no message, and A learns that it leads no more.
func TestCursor_AWriteOfALeaderWhoseLeaseWasTakenOverChangesNothing(t *testing.T) {
	pool, schema := pgtest.Schema(t)
	ctx := context.Background()
	cfg := pgstore.Config{Schema: schema, LeaderLease: 30 * time.Second} // no local check ends A's lead in this test
	st, err := pgstore.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	a := New(st)
	// An earlier message of aggregate 1 in the table path: the cursor
	// message behind it must move there too (tabling).
	earlier := fenceEnqueue(t, st, pool, fenceMsg("1"))
	if err := st.EnableCursor(ctx); err != nil {
		t.Fatal(err)
	}
	behind := fenceEnqueue(t, st, pool, fenceMsg("1"))
	other := fenceEnqueue(t, st, pool, fenceMsg("2"))

	p := store.ClaimParams{Owner: "A", Limit: 10, Lease: 30 * time.Second}
	c, err := a.Claim(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, r := range c.Records {
		got = append(got, r.Seq)
	}
	if leading, _ := a.Leading(); !leading || !slices.Equal(got, []int64{earlier, other}) {
		t.Fatalf("setup: A leads: %v, and claimed %v; want it to lead and claim %v", leading, got, []int64{earlier, other})
	}

	// A plans its next round trip, then hangs.
	a.cs.db.Lock()
	defer a.cs.db.Unlock()
	plan := a.planTrip(uuid.Nil, nil, &p, time.Now())
	if plan.trip.Save == nil || !slices.Equal(plan.trip.Table, []int64{behind}) {
		t.Fatalf("setup: A's plan saves: %v, moves %v to the table path; want a save moving [%d]", plan.trip.Save != nil, plan.trip.Table, behind)
	}
	a.cs.mu.Lock()
	a.cs.stopKeeper()
	aTok, keeper := a.cs.token, a.cs.keepDone
	a.cs.mu.Unlock()
	<-keeper

	// A's lease ends in the database (A is hung), and B takes the lead.
	if _, err := pool.Exec(ctx, "UPDATE "+pgx.Identifier{schema}.Sanitize()+".outbox_cursor SET lease_expires_at = now()"); err != nil {
		t.Fatal(err)
	}
	bst, err := pgstore.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b := New(bst)
	if _, err := b.Claim(ctx, store.ClaimParams{Owner: "B", Limit: 10, Lease: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if leading, _ := b.Leading(); !leading {
		t.Fatal("setup: B does not lead after A's lease ended")
	}
	defer func() { _ = b.Resign(ctx) }()
	taken := cursorRowVersion(t, pool, schema)

	// A resumes: its renewal, then its planned round trip.
	if a.renewLead(ctx, aTok, cfg.LeaderLease) {
		t.Error("A's renewal under its old token reports that A still leads")
	}
	if _, _, _, err := a.runPlan(ctx, &plan, &p, store.Claim{Token: uuid.New()}); err != nil {
		t.Fatal(err)
	}
	if now := cursorRowVersion(t, pool, schema); now != taken {
		t.Errorf("A's writes under its old token changed the cursor row:\n after B's takeover %s\n after A's writes   %s", taken, now)
	}
	var status string
	if err := pool.QueryRow(ctx, "SELECT status FROM "+pgx.Identifier{schema}.Sanitize()+".outbox_messages WHERE seq = $1", behind).Scan(&status); err != nil {
		t.Fatal(err)
	}
	if status != "QUEUED" {
		t.Errorf("message %d is %s after A's planned move to the table path; want QUEUED (B's to move)", behind, status)
	}
	if leading, _ := a.Leading(); leading {
		t.Error("A still believes it leads after its writes found the lease taken over")
	}
}

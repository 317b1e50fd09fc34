package cdc

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/store"
)

// tableClaim claims up to 10 messages on the table path and fails the
// test on an error.
func tableClaim(t *testing.T, tq *tableQueue) store.Claim {
	t.Helper()
	c, err := tq.Claim(context.Background(), store.ClaimParams{Owner: "table", Limit: 10, Lease: time.Minute})
	if err != nil {
		t.Fatalf("table path claim: %v", err)
	}
	return c
}

// deferredAggregates returns the ids of the deferred aggregates, sorted.
func deferredAggregates(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT aggregate_id FROM outbox_cdc_deferred ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// verdictOn checks rec as the stream does (check.sql) and returns what the
// stream does with it: publish, defer or skip.
func verdictOn(t *testing.T, r *Relay, rec outbox.Record) string {
	t.Helper()
	got := map[int64]verdict{}
	if err := r.checkOnce([]event{{rec: rec, isRec: true}}, got); err != nil {
		t.Fatal(err)
	}
	return map[action]string{actPublish: "publish", actDefer: "defer", actSkip: "skip"}[got[rec.Seq].action()]
}

func messagesOf(recs []outbox.Record) []outbox.Message {
	out := make([]outbox.Message, len(recs))
	for i, rec := range recs {
		out[i] = rec.Message
	}
	return out
}

// A table path claim releases the deferred aggregates that have nothing
// unsent left, and only those: the next message of a released aggregate
// goes through the stream, while an aggregate with a message in flight on
// the table path stays deferred.
func TestTablePath_ReleaseFreesOnlyAggregatesWithNothingUnsent(t *testing.T) {
	t.Parallel()
	pool, st, r := checkFixture(t)
	tq := &tableQueue{r: r}
	recs := enqueueOnePerAggregate(t, pool, st, "done", "busy")
	if err := deferAggregates(r, messagesOf(recs)); err != nil {
		t.Fatal(err)
	}
	c := tableClaim(t, tq)
	if n, err := tq.MarkSent(context.Background(), c.Token, []int64{recs[0].Seq}); err != nil || n != 1 {
		t.Fatalf("MarkSent = %d, %v; want 1", n, err)
	}
	if got := deferredAggregates(t, pool); !slices.Equal(got, []string{"busy", "done"}) {
		t.Fatalf("deferred before the next claim: %s; want busy and done", got)
	}
	tableClaim(t, tq)
	if got := deferredAggregates(t, pool); !slices.Equal(got, []string{"busy"}) {
		t.Errorf("deferred after the next claim: %s; want busy only (done has nothing unsent)", got)
	}
	next := enqueueOnePerAggregate(t, pool, st, "done", "busy")
	if a := verdictOn(t, r, next[0]); a != "publish" {
		t.Errorf("stream's action on the released aggregate's next message: %s; want publish", a)
	}
	if a := verdictOn(t, r, next[1]); a != "defer" {
		t.Errorf("stream's action on the deferred aggregate's next message: %s; want defer", a)
	}
}

// The release can judge an aggregate to have nothing unsent on a snapshot
// taken before the aggregate's next message committed, while the stream
// still finds the aggregate deferred and leaves that message to the table
// path. The aggregate must stay deferred then: the table path sends the
// message, and the stream defers the message after it rather than publish
// it first. The test holds the aggregate's deferred row locked so that the
// release's delete waits, after its snapshot, until the stream has checked
// and recorded the message.
func TestTablePath_ReleaseRacingTheStreamKeepsTheAggregateDeferred(t *testing.T) {
	t.Parallel()
	pool, st, r := checkFixture(t)
	ctx := context.Background()
	tq := &tableQueue{r: r}
	first := enqueueOnePerAggregate(t, pool, st, "x")
	if err := deferAggregates(r, messagesOf(first)); err != nil {
		t.Fatal(err)
	}
	c := tableClaim(t, tq)
	if n, err := tq.MarkSent(ctx, c.Token, seqsOf(c.Records)); err != nil || n != 1 {
		t.Fatalf("MarkSent = %d, %v; want 1", n, err)
	}
	// x is deferred with nothing unsent: the next claim releases it.

	blocker, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Rollback(ctx)
	var blockerPID int32
	if err := blocker.QueryRow(ctx, `SELECT pg_backend_pid() FROM outbox_cdc_deferred WHERE aggregate_id = 'x' FOR UPDATE`).Scan(&blockerPID); err != nil {
		t.Fatal(err)
	}
	type result struct {
		c   store.Claim
		err error
	}
	racing := make(chan result, 1)
	go func() {
		c, err := tq.Claim(ctx, store.ClaimParams{Owner: "table", Limit: 10, Lease: time.Minute})
		racing <- result{c, err}
	}()
	waitBlockedBy(t, pool, blockerPID)

	// Meanwhile the next message commits, and the stream checks it and
	// records its batch.
	m1 := enqueueOnePerAggregate(t, pool, st, "x")[0]
	if a := verdictOn(t, r, m1); a != "defer" {
		t.Fatalf("stream's action on %d while x is deferred: %s; want defer", m1.Seq, a)
	}
	if err := deferAggregates(r, []outbox.Message{m1.Message}); err != nil {
		t.Fatal(err)
	}
	if err := blocker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	res := <-racing
	if res.err != nil {
		t.Fatalf("racing claim: %v", res.err)
	}

	claimed := append(seqsOf(res.c.Records), seqsOf(tableClaim(t, tq).Records)...)
	if !slices.Contains(claimed, m1.Seq) {
		t.Errorf("table path claims took %v, not %d: x's message is stranded (deferred aggregates: %v)",
			claimed, m1.Seq, deferredAggregates(t, pool))
	}
	m2 := enqueueOnePerAggregate(t, pool, st, "x")[0]
	if a := verdictOn(t, r, m2); a != "defer" {
		t.Errorf("stream's action on %d, after %d of the table path: %s; want defer", m2.Seq, m1.Seq, a)
	}
}

// waitBlockedBy waits until a backend waits for a lock that the backend
// pid holds.
func waitBlockedBy(t *testing.T, pool *pgxpool.Pool, pid int32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var blocked bool
		err := pool.QueryRow(context.Background(),
			`SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE $1::int = ANY (pg_blocking_pids(pid)))`, pid).Scan(&blocked)
		if err != nil {
			t.Fatal(err)
		}
		if blocked {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("nothing waits for the blocker's lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func seqsOf(recs []outbox.Record) []int64 {
	out := make([]int64, len(recs))
	for i, rec := range recs {
		out[i] = rec.Seq
	}
	return out
}

package cursor_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgstoretest"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// After a failure the later messages of hot aggregates wait in the table
// path; a relay drains them at its claims' pace, not one per
// FullClaimInterval. (A table-path claim that found nothing while the
// aggregates' heads were in flight held the next claim back for a second:
// in outbox-lab chaos --cursor four hot aggregates drained at two messages a
// second each, and 400 such messages took over a minute.)
func TestCursor_ARelayDrainsHotAggregatesThroughTheTablePathAtOnce(t *testing.T) {
	b := pgstoretest.SetupCursor(t, pgstore.Config{})
	ctx := pgstoretest.Context(t)
	const perAggregate = 50
	var msgs []outbox.Message
	for i := range 4 * perAggregate {
		msgs = append(msgs, pgstoretest.Msg("Probe", fmt.Sprint("hot-", i%4)))
	}
	b.Enqueue(t, msgs...)
	// The heads fail once; everything behind them enters the table path.
	c, err := b.Cursor.Claim(ctx, store.ClaimParams{Owner: "A", Limit: 100, Lease: time.Minute})
	if err != nil || len(c.Records) != 4 {
		t.Fatalf("claim = %v, %v; want the 4 heads", pgstoretest.Seqs(c.Records), err)
	}
	var failures []store.Failure
	for _, r := range c.Records {
		failures = append(failures, store.Failure{Seq: r.Seq, Error: "broker unreachable"})
	}
	if n, err := b.Cursor.MarkFailed(ctx, c.Token, failures); err != nil || n != 4 {
		t.Fatalf("MarkFailed = %d, %v", n, err)
	}
	if err := b.Cursor.Resign(ctx); err != nil {
		t.Fatal(err)
	}

	snk := &pgstoretest.RecordingSink{}
	st := b.NewCursor(t, pgstore.Config{})
	rl, err := relay.New(relay.Config{Strategy: st.Strategy, Sink: snk, ID: "drainer", PollInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := rl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rl.Stop(context.Background()) }()
	for snk.Count() < len(msgs) {
		// 200 messages, 50 per aggregate one after the other: a few
		// hundred milliseconds; one claim per FullClaimInterval would be
		// about 50 s.
		if time.Since(start) > 10*time.Second {
			t.Fatalf("%d of %d published after 10 s", snk.Count(), len(msgs))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("drained %d table-path messages in %v", len(msgs), time.Since(start))
	for agg, got := range snk.ByAggregate() {
		for i := 1; i < len(got); i++ {
			if got[i] <= got[i-1] {
				t.Errorf("aggregate %s published out of order: %v", agg, got)
				break
			}
		}
	}
}

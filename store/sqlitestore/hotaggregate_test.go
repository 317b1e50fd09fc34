package sqlitestore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/sqlitestore"
)

// enqueueRoundRobin enqueues n messages over the aggregates ids of type
// Order, one after the other, in one transaction.
func (b *bundle) enqueueRoundRobin(t *testing.T, n int, ids ...string) {
	t.Helper()
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		msgs[i] = msg("Order", ids[i%len(ids)])
	}
	b.enqueue(t, msgs...)
}

// blockHead makes the head of aggregate Order/id a FAILED message that is
// not due for an hour, as after a failed publish.
func (b *bundle) blockHead(t *testing.T, id string) {
	t.Helper()
	_, err := b.db.ExecContext(testCtx(t), `UPDATE outbox_messages
		SET status = 'FAILED', attempts = 1, next_attempt_at = next_attempt_at + 3600000
		WHERE seq = (SELECT min(seq) FROM outbox_messages WHERE aggregate_type = 'Order' AND aggregate_id = ?)`, id)
	if err != nil {
		t.Fatal(err)
	}
}

func (b *bundle) claim(t *testing.T, limit int) store.Claim {
	t.Helper()
	c, err := b.store.Claim(testCtx(t), store.ClaimParams{Owner: "relay-" + t.Name(), Limit: limit, Lease: time.Minute})
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	return c
}

// The scan by aggregate visits at most a span of aggregates per claim, so
// a claim behind many blocked aggregates stays short; the claims after it
// go on from where it stopped, so the heads further on are still served.
func TestClaim_ScanByAggregateIsBoundedAndGoesOnWhereItStopped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const limit = 10
	span := sqlitestore.ClaimSpan(limit)
	// The walk in seq order sees only the blocked backlog of "a-first";
	// then 2*span aggregates with blocked heads, and three claimable ones
	// after them in key order.
	b.enqueueRoundRobin(t, 2*span, "a-first")
	b.blockHead(t, "a-first")
	blocked := make([]outbox.Message, 2*span)
	for i := range blocked {
		blocked[i] = msg("Order", fmt.Sprintf("b-%04d", i))
	}
	b.enqueue(t, blocked...)
	if _, err := b.db.ExecContext(testCtx(t), `UPDATE outbox_messages
		SET status = 'FAILED', attempts = 1, next_attempt_at = next_attempt_at + 3600000
		WHERE aggregate_id LIKE 'b-%'`); err != nil {
		t.Fatal(err)
	}
	b.enqueueRoundRobin(t, 3, "c-1", "c-2", "c-3")

	if c := b.claim(t, limit); len(c.Records) != 0 {
		t.Fatalf("the first claim found %d heads past %d blocked aggregates: its scan was not bounded to %d", len(c.Records), 2*span, span)
	}
	served := map[string]bool{}
	for range 3 {
		for _, r := range b.claim(t, limit).Records {
			served[r.AggregateID] = true
		}
	}
	if len(served) != 3 || !served["c-1"] || !served["c-2"] || !served["c-3"] {
		t.Fatalf("three more claims served %v, want c-1, c-2 and c-3", served)
	}
}

// A relay (two workers, retries on) drains a backlog that sits on three
// aggregates, far longer than the claim's span, publishing each aggregate's
// messages once each and in order.
func TestRelay_DrainsABacklogOnThreeAggregatesInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	// Fewer under the race detector, which slows SQLite down a lot.
	perAggregate := 600
	if raceEnabled {
		perAggregate = 120
	}
	ids := []string{"hot-a", "hot-b", "hot-c"}
	msgs := make([]outbox.Message, 0, perAggregate*len(ids))
	for n := range perAggregate {
		for _, id := range ids {
			msgs = append(msgs, outbox.Message{AggregateType: "Order", AggregateID: id, EventType: "OrderPlaced",
				Payload: fmt.Appendf(nil, `{"n":%d}`, n)})
		}
	}
	b.enqueue(t, msgs...)
	if len(msgs) <= sqlitestore.ClaimSpan(50) {
		t.Fatalf("a backlog of %d is not beyond the span", len(msgs))
	}

	sink := &orderedSink{failEvery: 7, published: map[string][]int{}}
	r, err := relay.New(relay.Config{
		Store: b.store, Sink: sink, BatchSize: 50, Workers: 2,
		PollInterval: sqlitestore.PollInterval, RetryBase: time.Millisecond, RetryMax: 5 * time.Millisecond,
		Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer r.Stop(context.Background())
	for {
		counts, err := b.store.Counts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if counts[outbox.StatusSent] == int64(len(msgs)) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("not drained: %v", counts)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if sink.failed == 0 {
		t.Error("no publish failed: the retry path was not exercised")
	}
	want := make([]int, perAggregate)
	for i := range want {
		want[i] = i
	}
	for _, id := range ids {
		if got := sink.published[id]; !slices.Equal(got, want) {
			t.Errorf("aggregate %s published %d messages, not 0..%d once each in order", id, len(got), perAggregate-1)
		}
	}
}

// Messages in flight at the front of the backlog (claimed by other
// workers) do not use up the claim's walk in seq order: it starts at the
// first due message, so the oldest due heads are claimed, in seq order,
// behind more messages in flight than its span.
func TestClaim_WalkStartsAtTheFirstDueMessage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const limit = 10
	span := sqlitestore.ClaimSpan(limit)
	inFlight := make([]outbox.Message, span+50)
	for i := range inFlight {
		inFlight[i] = msg("Order", fmt.Sprintf("a-%04d", i))
	}
	b.enqueue(t, inFlight...)
	if c := b.claim(t, len(inFlight)); len(c.Records) != len(inFlight) {
		t.Fatalf("claimed %d of the %d to hold in flight", len(c.Records), len(inFlight))
	}
	due := make([]outbox.Message, 2*limit)
	for i := range due {
		due[i] = msg("Order", fmt.Sprintf("z-%04d", i))
	}
	b.enqueue(t, due...)
	c := b.claim(t, limit)
	var got []string
	for _, r := range c.Records {
		got = append(got, r.AggregateID)
	}
	want := []string{"z-0000", "z-0001", "z-0002", "z-0003", "z-0004", "z-0005", "z-0006", "z-0007", "z-0008", "z-0009"}
	if !slices.Equal(got, want) {
		t.Fatalf("claim behind %d messages in flight got %v, want the %d oldest due: %v", len(inFlight), got, limit, want)
	}
}

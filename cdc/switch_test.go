package cdc_test

import (
	"context"
	"testing"
	"time"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/cdc"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/sink"
)

// startPolling runs the polling relay on the test's outbox until stop is
// called.
func (e *env) startPolling(s sink.Sink) (stop func()) {
	e.t.Helper()
	r, err := relay.New(relay.Config{Store: e.store, Sink: s, PollInterval: 50 * time.Millisecond,
		Lease: 5 * time.Second, Logger: quietLogger()})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			e.t.Fatal(err)
		}
	}
}

// batchOf returns one message for each of aggregates aggregates, event n.
func batchOf(aggregates, n int) []outbox.Message {
	var msgs []outbox.Message
	for i := range aggregates {
		msgs = append(msgs, seqMessage(fmtAgg(i), n))
	}
	return msgs
}

func wantEach(aggregates, n int) map[string]int {
	want := map[string]int{}
	for i := range aggregates {
		want[fmtAgg(i)] = n
	}
	return want
}

// Switching from polling to CDC as docs/cdc.md describes (stop the polling
// relay, start the CDC relay) loses nothing and duplicates nothing: the
// backlog the polling relay left goes through the table path, in order,
// before the same aggregates' new messages from the stream.
func TestSwitch_PollingToCDC_NoLossNoDuplicates(t *testing.T) {
	t.Parallel()
	e := newEnv(t, broker.Config{})
	snk := e.newSink(nil)
	stopPolling := e.startPolling(snk)
	for n := range 5 {
		e.enqueue(batchOf(10, n)...)
	}
	e.consumed(50, 30*time.Second)
	stopPolling()
	for n := 5; n < 10; n++ { // the backlog: committed while no relay runs
		e.enqueue(batchOf(10, n)...)
	}

	r := e.start(e.config(snk))
	e.waitLeader(r, 20*time.Second)
	for n := 10; n < 15; n++ {
		e.enqueue(batchOf(10, n)...)
	}
	if dups := checkOrder(t, e.consumed(150, 30*time.Second), wantEach(10, 15)); dups != 0 {
		t.Fatalf("%d duplicates", dups)
	}
	e.waitCount(outbox.StatusSent, 150, 10*time.Second)
	e.waitDeferred(0, 10*time.Second)
}

// Running both relays at once during a switch is safe too: order per
// aggregate holds, and duplicates stay within the at-least-once bound.
func TestSwitch_PollingAndCDCOverlap_NoLossOrderKept(t *testing.T) {
	t.Parallel()
	e := newEnv(t, broker.Config{})
	snk := e.newSink(nil)
	stopPolling := e.startPolling(snk)
	for n := range 5 {
		e.enqueue(batchOf(10, n)...)
	}
	r := e.start(e.config(snk))
	e.waitLeader(r, 20*time.Second)
	for n := 5; n < 15; n++ {
		e.enqueue(batchOf(10, n)...)
	}
	stopPolling()
	for n := 15; n < 20; n++ {
		e.enqueue(batchOf(10, n)...)
	}
	dups := checkOrder(t, e.consumed(200, 30*time.Second), wantEach(10, 20))
	t.Logf("%d duplicates", dups)
	e.waitCount(outbox.StatusSent, 200, 10*time.Second)
}

// Switching back from CDC to polling (stop the CDC relay, start the polling
// relay) re-sends nothing the CDC relay had marked, and loses nothing.
func TestSwitch_CDCToPolling_NoLossNoDuplicates(t *testing.T) {
	t.Parallel()
	e := newEnv(t, broker.Config{})
	snk := e.newSink(nil)
	r := e.newRelay(e.config(snk))
	e.waitLeader(r, 20*time.Second)
	for n := range 5 {
		e.enqueue(batchOf(10, n)...)
	}
	e.consumed(50, 30*time.Second)
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	for n := 5; n < 10; n++ {
		e.enqueue(batchOf(10, n)...)
	}
	stop := e.startPolling(snk)
	defer stop()
	if dups := checkOrder(t, e.consumed(100, 30*time.Second), wantEach(10, 10)); dups != 0 {
		t.Fatalf("%d duplicates", dups)
	}
}

// With CleanupDelete ("write and forget") the table keeps only what is not
// yet published: delivered rows are deleted, on the stream and on the
// table path alike.
func TestCleanupDelete_TableKeepsOnlyUnsent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, broker.Config{})
	e.enqueue(seqMessage("x", 0)) // before the slot: the table path sends it
	cfg := e.config(e.newSink(nil))
	cfg.Cleanup = cdc.CleanupDelete
	r := e.start(cfg)
	e.waitLeader(r, 20*time.Second)
	for n := 1; n < 10; n++ {
		e.enqueue(seqMessage("x", n), seqMessage("y", n-1))
	}
	checkOrder(t, e.consumed(19, 30*time.Second), map[string]int{"x": 10, "y": 9})
	deadline := time.Now().Add(10 * time.Second)
	for {
		var rows int
		if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox_messages`).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d rows left after delivery; want none", rows)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

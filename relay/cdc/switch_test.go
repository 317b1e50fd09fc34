package cdc_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/relay/cdc"
	"github.com/outbox-dev/outbox/relay/claim"
	"github.com/outbox-dev/outbox/relay/cursor"
	"github.com/outbox-dev/outbox/relay/strategy"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// startPolling runs the polling relay on the test's outbox until stop is
// called: on the store, or on a Cursor of it when the outbox is in cursor
// mode, as 'outbox relay' does.
func (e *env) startPolling(s sink.Sink) (stop func()) {
	e.t.Helper()
	m, err := e.store.Mode(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	var strat strategy.Strategy = claim.New(e.store)
	if m.Mode == pgstore.ModeCursor {
		strat = cursor.New(e.store)
	}
	r, err := relay.New(relay.Config{Strategy: strat, Sink: s, PollInterval: 50 * time.Millisecond,
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

// writeBackground commits a batch (a message of each of aggregates
// aggregates, event n) every interval until stop, which returns how many
// batches it committed: the messages written across a switch of modes.
func (e *env) writeBackground(aggregates int, interval time.Duration) (stop func() int) {
	done := make(chan struct{})
	n := make(chan int)
	go func() {
		ctx := context.Background()
		i := 0
		defer func() { n <- i }()
		for {
			select {
			case <-done:
				return
			case <-time.After(interval):
			}
			err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error { return e.store.Enqueue(ctx, tx, batchOf(aggregates, i)...) })
			if err != nil {
				e.t.Errorf("enqueue batch %d: %v", i, err)
				return
			}
			i++
		}
	}()
	return func() int {
		close(done)
		return <-n
	}
}

// deliveredOnce lets the writer go on for a moment, stops it, and asserts
// that each of its messages was delivered once, in order per aggregate. It
// returns the number of batches written.
func (e *env) deliveredOnce(t *testing.T, stopWriting func() int) int {
	t.Helper()
	time.Sleep(300 * time.Millisecond)
	n := stopWriting()
	if dups := checkOrder(t, e.consumed(10*n, 30*time.Second), wantEach(10, n)); dups != 0 {
		t.Fatalf("%d duplicates", dups)
	}
	return n
}

// cdcWriting starts a CDC relay on e's outbox, which is in CDC mode, and a
// writer (writeBackground), and returns once 50 messages were delivered.
func (e *env) cdcWriting() (*cdc.Relay, sink.Sink, func() int) {
	e.t.Helper()
	snk := e.newSink(nil)
	r := e.newRelay(e.config(snk))
	e.waitLeader(r, 20*time.Second)
	stopWriting := e.writeBackground(10, 20*time.Millisecond)
	e.consumed(50, 30*time.Second)
	return r, snk, stopWriting
}

// switchRefused asserts that SetMode(m) is refused, with an error that
// says what to do. SetMode tries again while a CDC relay streams from the
// slot, for up to 10 s (a relay that is stopping lets go of it), and then
// refuses; the deadline lies beyond that, so that the refusal ends the
// call, not a deadline that falls inside one of its tries on a busy
// machine.
func (e *env) switchRefused(m pgstore.Mode, says string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := e.store.SetMode(ctx, m, "test")
	if !errors.Is(err, pgstore.ErrModeSwitch) || !strings.Contains(err.Error(), says) {
		e.t.Fatalf("SetMode(%s) = %v, want ErrModeSwitch saying %q", m, err, says)
	}
}

// Claim mode to CDC mode ('outbox mode set cdc', docs/cdc.md "Switching
// modes"), with messages written throughout: a CDC relay refuses to start
// before the switch; the switch is made while the polling relay runs; once
// it stopped, the CDC relay sends the backlog it left through the table
// path, in order, before the same aggregates' new messages from the
// stream. Nothing is lost and nothing duplicated.
func TestSwitch_ClaimToCDC_NoLossNoDuplicates(t *testing.T) {
	t.Parallel()
	e := newEnv(t, broker.Config{})
	e.setMode(pgstore.ModeClaim)
	snk := e.newSink(nil)
	early := e.newRelay(e.config(snk))
	waitStopped(t, early, 20*time.Second)
	if err := early.Err(); !errors.Is(err, cdc.ErrNotCDCMode) || !strings.Contains(err.Error(), "in claim mode") {
		t.Fatalf("a CDC relay on an outbox in claim mode stopped with %v, want ErrNotCDCMode naming claim mode", err)
	}

	stopPolling := e.startPolling(snk)
	stopWriting := e.writeBackground(10, 20*time.Millisecond)
	e.consumed(50, 30*time.Second)
	if sw := e.setMode(pgstore.ModeCDC); sw.From != pgstore.ModeClaim || sw.To != pgstore.ModeCDC {
		t.Fatalf("SetMode(cdc) = %+v, want from claim to cdc", sw)
	}
	time.Sleep(200 * time.Millisecond) // the polling relay goes on meanwhile
	stopPolling()
	time.Sleep(200 * time.Millisecond) // the backlog: committed while no relay runs

	r := e.start(e.config(snk))
	e.waitLeader(r, 20*time.Second)
	n := e.deliveredOnce(t, stopWriting)
	e.waitCount(outbox.StatusSent, int64(10*n), 10*time.Second)
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

// CDC mode to claim mode ('outbox mode set claim'), with messages written
// throughout: refused while the CDC relay streams; once it stopped, the
// switch drops its slot, publication and registry row, and the polling
// relay sends everything the CDC relay had not marked, in order, re-sending
// nothing it had marked.
func TestSwitch_CDCToClaim_NoLossNoDuplicates(t *testing.T) {
	t.Parallel()
	e := newEnv(t, broker.Config{})
	r, snk, stopWriting := e.cdcWriting()
	e.switchRefused(pgstore.ModeClaim, "stop the CDC relays")
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	slot := cdc.DefaultSlot(e.schema)
	if sw := e.setMode(pgstore.ModeClaim); sw.From != pgstore.ModeCDC || !slices.Equal(sw.DroppedSlots, []string{slot}) {
		t.Fatalf("SetMode(claim) = %+v, want from cdc, slot %s dropped", sw, slot)
	}
	if n := e.cdcObjects(slot); n != 0 {
		t.Fatalf("after the switch: %d of slot, publication and registry row left, want 0", n)
	}
	stop := e.startPolling(snk)
	defer stop()
	e.deliveredOnce(t, stopWriting)
}

// Cursor mode to CDC mode, with messages written throughout: refused while
// the cursor's leader runs; once it stopped, the unsent QUEUED messages
// become PENDING and the CDC relay sends them through its table path, in
// order, before the stream's.
func TestSwitch_CursorToCDC_NoLossNoDuplicates(t *testing.T) {
	t.Parallel()
	e := newEnv(t, broker.Config{})
	e.setMode(pgstore.ModeCursor)
	snk := e.newSink(nil)
	stopPolling := e.startPolling(snk)
	stopWriting := e.writeBackground(10, 20*time.Millisecond)
	e.consumed(50, 30*time.Second)
	e.switchRefused(pgstore.ModeCDC, "stop the relays first")
	stopPolling()
	time.Sleep(200 * time.Millisecond) // QUEUED while no relay runs
	if sw := e.setMode(pgstore.ModeCDC); sw.From != pgstore.ModeCursor || sw.Requeued == 0 {
		t.Fatalf("SetMode(cdc) = %+v, want from cursor with the unsent QUEUED messages requeued", sw)
	}
	r := e.start(e.config(snk))
	e.waitLeader(r, 20*time.Second)
	n := e.deliveredOnce(t, stopWriting)
	e.waitCount(outbox.StatusSent, int64(10*n), 10*time.Second)
}

// CDC mode to cursor mode, with messages written throughout: EnableCursor
// (outbox cursor enable) refuses to leave CDC mode; SetMode, once the CDC
// relay stopped, drops the slot and turns cursor mode on; the polling
// relay sends what the CDC relay left through the table path and leads the
// cursor for the rest, in order.
func TestSwitch_CDCToCursor_NoLossNoDuplicates(t *testing.T) {
	t.Parallel()
	e := newEnv(t, broker.Config{})
	r, snk, stopWriting := e.cdcWriting()
	if err := e.store.EnableCursor(context.Background()); !errors.Is(err, pgstore.ErrCursorMode) ||
		!strings.Contains(err.Error(), "outbox mode set cursor") {
		t.Fatalf("EnableCursor in cdc mode = %v, want ErrCursorMode pointing at 'outbox mode set cursor'", err)
	}
	if err := r.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // PENDING while no relay runs
	if sw := e.setMode(pgstore.ModeCursor); sw.From != pgstore.ModeCDC || len(sw.DroppedSlots) != 1 {
		t.Fatalf("SetMode(cursor) = %+v, want from cdc with the slot dropped", sw)
	}
	stop := e.startPolling(snk)
	defer stop()
	e.deliveredOnce(t, stopWriting)
	// Cursor mode takes the new messages: a message of an aggregate with
	// nothing left on the table path is QUEUED. (The writer's messages
	// after the switch may all have been moved to the table path, behind
	// their aggregates' backlog from the CDC relay, if it drained slowly.)
	e.enqueue(seqMessage("after-switch", 0))
	var status string
	err := e.pool.QueryRow(context.Background(), `SELECT status FROM outbox_messages WHERE aggregate_id = 'after-switch'`).Scan(&status)
	if err != nil || status != "QUEUED" {
		t.Fatalf("message enqueued after the switch: status %q (%v); want QUEUED: cursor mode did not take it", status, err)
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

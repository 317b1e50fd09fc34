package cdc_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/relay/cdc"
)

// hangWriter commits one event of each of its aggregates per transaction,
// every 20 ms, until stop; want counts each aggregate's events.
type hangWriter struct {
	done chan struct{}
	wg   sync.WaitGroup
	want map[string]int
}

func (e *env) startHangWriter(aggregates int) *hangWriter {
	w := &hangWriter{done: make(chan struct{}), want: map[string]int{}}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for {
			select {
			case <-w.done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			var batch []outbox.Message
			for a := range aggregates {
				agg := fmt.Sprintf("w-%02d", a)
				batch = append(batch, seqMessage(agg, w.want[agg]))
			}
			e.enqueue(batch...)
			for _, m := range batch {
				w.want[m.AggregateID]++
			}
		}
	}()
	return w
}

func (w *hangWriter) stop() (map[string]int, int) {
	close(w.done)
	w.wg.Wait()
	total := 0
	for _, n := range w.want {
		total += n
	}
	return w.want, total
}

// slotWatch samples the slot's confirmed position until stop and reports
// whether it ever moved backwards.
type slotWatch struct {
	done     chan struct{}
	finished chan struct{}
	back     string // the first backward move seen
}

func (e *env) watchSlot() *slotWatch {
	sw := &slotWatch{done: make(chan struct{}), finished: make(chan struct{})}
	slot := cdc.DefaultSlot(e.schema)
	go func() {
		defer close(sw.finished)
		var last pglogrepl.LSN
		for {
			select {
			case <-sw.done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			var s *string
			if err := e.pool.QueryRow(context.Background(),
				"SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&s); err != nil || s == nil {
				continue
			}
			lsn, err := pglogrepl.ParseLSN(*s)
			if err != nil {
				continue
			}
			if lsn < last && sw.back == "" {
				sw.back = fmt.Sprintf("%s after %s", lsn, last)
			}
			last = max(last, lsn)
		}
	}()
	return sw
}

func (sw *slotWatch) stop() string {
	close(sw.done)
	<-sw.finished
	return sw.back
}

// leaseHolder is the slot's lease row: its owner and token.
func (e *env) leaseHolder() (owner, token string) {
	e.t.Helper()
	var o, tok *string
	if err := e.pool.QueryRow(context.Background(), "SELECT owner, token::text FROM outbox_cdc_leases WHERE slot_name = $1",
		cdc.DefaultSlot(e.schema)).Scan(&o, &tok); err != nil {
		e.t.Fatal(err)
	}
	if o != nil {
		owner = *o
	}
	if tok != nil {
		token = *tok
	}
	return owner, token
}

// The active relay's process hangs (SIGSTOP) while writers commit: the
// standby process takes over within its lease and publishes what came
// next. When the hung relay resumes (SIGCONT), it finds it lost the lead
// and stands by: it takes the lease back never, its late records are
// refused (the internal test TestRecordAndCheck_FencedOnceAnotherRelayTookTheLease
// shows what they would change), and the slot's confirmed position never
// moves backwards. Every message arrives, in order per aggregate.
func TestProcess_SIGSTOPLeaderIsReplacedAndFencedWhenItResumes(t *testing.T) {
	t.Parallel()
	bin := outboxBinary(t)
	e := newEnv(t, broker.Config{})
	a, aout := e.relayProcess(bin, "--relay-id", "A")
	waitOutput(t, aout, "active: streaming from the slot", 30*time.Second)
	_, bout := e.relayProcess(bin, "--relay-id", "B")
	waitOutput(t, bout, "standing by", 30*time.Second)
	slot := e.watchSlot()
	w := e.startHangWriter(5)
	time.Sleep(time.Second)

	if err := a.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = a.Process.Signal(syscall.SIGCONT)
		}
	}()
	stopped := time.Now()
	probe := seqMessage("probe", 0)
	e.enqueue(probe)
	// The guarantee, with room for a loaded machine: B leads and publishes
	// what was committed after A hung.
	waitOutput(t, bout, "active: streaming from the slot", 15*time.Second)
	e.waitCount(outbox.StatusPending, 0, 15*time.Second)
	t.Logf("B streams and caught up %s after A hung (lease %s)", time.Since(stopped).Round(time.Millisecond), cdc.DefaultLeaderLease)
	owner, token := e.leaseHolder()
	if owner != "B" || token == "" {
		t.Fatalf("the slot's lease after the takeover: owner %q, token %q; want B's", owner, token)
	}

	if err := a.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	waitOutput(t, aout, "lost the lead of the slot", 15*time.Second)
	waitOutput(t, aout, "standing by", 30*time.Second)
	time.Sleep(time.Second)
	want, total := w.stop()
	want["probe"] = 1
	recs := e.consumed(total+1, 60*time.Second)
	dups := checkOrder(t, recs, want)
	e.waitCount(outbox.StatusPending, 0, 15*time.Second)

	if o, tok := e.leaseHolder(); o != owner || tok != token {
		t.Errorf("the slot's lease after A resumed: owner %q, token %q; want B's (%q, %q) untouched", o, tok, owner, token)
	}
	if back := slot.stop(); back != "" {
		t.Errorf("the slot's confirmed position moved backwards: %s", back)
	}
	c := e.counts()
	if c[outbox.StatusFailed] != 0 || c[outbox.StatusDeadLetter] != 0 || c[outbox.StatusInFlight] != 0 {
		t.Errorf("message states at the end: %v; want every message SENT", c)
	}
	if n := strings.Count(aout.String(), "active: streaming from the slot"); n != 1 {
		t.Errorf("A became active %d times; want once, before it hung", n)
	}
	t.Logf("%d records for %d messages (%d duplicates)", len(recs), total+1, dups)
}

//go:build unix

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/internal/freeport"
	"github.com/outbox-dev/outbox/ops"
	"github.com/outbox-dev/outbox/relay/cdc"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// The per-strategy suite: the relay's promises, checked end to end with
// relay processes on each of its three strategies. The store conformance
// suite (store/storetest) covers the claim and cursor queues; CDC is not a
// store.Queue (only its table path is), so the promises are checked here,
// at the relay's level, the same way for all three.

// strategy is how the suite runs the relays.
type strategy struct {
	name string
	// cursor puts the outbox in cursor mode before any relay starts.
	cursor bool
	// args are the relay's flags for the strategy.
	args []string
	// publishing is the line the first relay prints once it publishes:
	// for the strategies with a leader, once it leads.
	publishing string
}

var strategies = []strategy{
	{name: "claim", publishing: "relay starting"},
	{name: "cursor", cursor: true, publishing: "cursor: leading the cursor"},
	{name: "cdc", args: []string{"--mode", "cdc"}, publishing: "active: streaming from the slot"},
}

// suiteEnv is one case's outbox, broker and relays on one strategy.
type suiteEnv struct {
	*env
	s      strategy
	broker *broker.Broker
}

// newSuiteEnv is newEnv for strategy s (newCursorEnv for cursor), with a
// broker of its own started with bcfg (on any free port unless
// bcfg.Listen is set) in place of newEnv's; for CDC, it removes the slot
// once the test's relays have stopped.
func newSuiteEnv(t *testing.T, s strategy, bcfg broker.Config) *suiteEnv {
	t.Helper()
	var e *env
	if s.cursor {
		e = newCursorEnv(t)
	} else {
		e = newEnv(t)
	}
	if s.name == "cdc" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := e.store.SetMode(ctx, pgstore.ModeCDC, "test")
		cancel()
		if err != nil {
			t.Fatalf("switch the outbox to cdc mode: %v", err)
		}
		// Cleanups run last first: this one after the relays were killed,
		// before the schema is dropped.
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := cdc.Remove(ctx, e.pool, e.schema, "", ""); err != nil {
				t.Logf("remove the CDC slot of %s: %v", e.schema, err)
			}
		})
	}
	if bcfg.Listen == "" {
		bcfg.Listen = "127.0.0.1:0"
	}
	b, err := broker.Start(bcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	e.addrs = b.Addrs()
	return &suiteEnv{env: e, s: s, broker: b}
}

// waitSentOnce waits until message id is SENT and checks that the topic
// has it once.
func (e *suiteEnv) waitSentOnce(id uuid.UUID, what string) {
	e.t.Helper()
	e.waitStatus(id, outbox.StatusSent, 30*time.Second)
	if n := e.copies(id, 1, time.Second); n != 1 {
		e.t.Fatalf("%s is on the topic %d times; want 1", what, n)
	}
}

// relay starts a relay process named id on the strategy (its connections
// carry application_name e.appName(id)), with the extra environment and
// flags.
func (e *suiteEnv) relay(id string, env []string, flags ...string) *proc {
	e.t.Helper()
	return e.cursorRelay(id, env, append(slices.Clone(e.s.args), flags...)...)
}

// publishingRelay starts relay id and waits until it publishes (leads).
func (e *suiteEnv) publishingRelay(id string, env []string, flags ...string) *proc {
	e.t.Helper()
	p := e.relay(id, env, flags...)
	p.waitFor(e.s.publishing, 30*time.Second)
	return p
}

// TestStrategySuite runs every case on every strategy. The cases of one
// strategy run one after the other (a CDC relay holds a replication
// connection, and the server has few); the strategies run in parallel.
func TestStrategySuite(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		run  func(t *testing.T, s strategy)
	}{
		{"OrderPerAggregateHoldsAcrossABrokerOutage", suiteOrderAcrossAnOutage},
		{"ADeadLetterBlocksOnlyItsAggregate", suiteDeadLetterBlocksItsAggregate},
		{"ALateCommitIsNotSkipped", suiteLateCommit},
		{"ARelayKilledAfterTheAckResendsAndLosesNothing", suiteKillAfterAck},
	}
	for _, s := range strategies {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) { c.run(t, s) })
			}
		})
	}
}

// The broker stops while events are enqueued and the relays publish, and
// comes back on the same address with its data: the publishes that failed
// are retried, every event is delivered, and the first copies of each
// aggregate's events are in order.
func suiteOrderAcrossAnOutage(t *testing.T, s strategy) {
	listen, err := freeport.Addr() // the broker listens there again after its restart
	if err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	e := newSuiteEnv(t, s, broker.Config{Listen: listen, DataDir: dataDir})
	// Publishes give up after 1 s (the claim relay's default with --lease
	// 2s; the CDC stream's is 15 s), so that the outage fails them.
	a := e.publishingRelay("A", nil, "--publish-timeout", "1s")
	b := e.relay("B", nil, "--publish-timeout", "1s")
	w := e.startWriter(10, 20*time.Millisecond)
	// The outage begins once a relay publishes, so that it fails publishes:
	// on a busy server the stream may deliver the first commits seconds
	// after they were made.
	waitFor(t, "a first publish", 30*time.Second, func() bool {
		return strings.Contains(a.output()+b.output(), "first message published")
	})
	time.Sleep(time.Second)
	e.broker.Close()
	time.Sleep(4 * time.Second)
	restarted, err := broker.Start(broker.Config{Listen: e.addrs[0], DataDir: dataDir})
	if err != nil {
		t.Fatalf("restart the broker on %s: %v", e.addrs[0], err)
	}
	t.Cleanup(restarted.Close)
	time.Sleep(time.Second)
	want, total := w.stop()
	recs := consumed(t, e.addrs, e.topic, total, 90*time.Second)
	dups := checkOrder(t, recs, want)
	failed := strings.Count(a.output()+b.output(), "broker unavailable")
	if failed == 0 {
		t.Fatalf("no relay logged a publish that failed for the outage:\nA:\n%s\nB:\n%s", a.output(), b.output())
	}
	t.Logf("%d records for %d events (%d duplicates); the relays logged %d failed publishes", len(recs), total, dups, failed)
}

// A message the broker refuses for good (too large) becomes a dead letter
// at once; the messages behind it in its aggregate wait, however long,
// while the other aggregates flow, those enqueued before and after it;
// once the dead letter is discarded, the next one of its aggregate goes out.
func suiteDeadLetterBlocksItsAggregate(t *testing.T, s strategy) {
	e := newSuiteEnv(t, s, broker.Config{MaxMessageBytes: 10_000})
	e.publishingRelay("A", nil)
	e.relay("B", nil)

	poison := seqMessage("P", 0)
	poison.ID = uuid.Must(uuid.NewV7())
	blob := make([]byte, 40_000) // random, so that compression cannot shrink it under the limit
	_, _ = rand.Read(blob)
	poison.Payload = []byte(`{"aggregate":"P","n":0,"blob":"` + base64.StdEncoding.EncodeToString(blob) + `"}`)
	behind := seqMessage("P", 1)
	behind.ID = uuid.Must(uuid.NewV7())
	want := map[string]int{}
	round := func() {
		var batch []outbox.Message
		for a := range 20 {
			agg := fmt.Sprintf("ok-%02d", a)
			batch = append(batch, seqMessage(agg, want[agg]))
			want[agg]++
		}
		e.enqueue(batch...)
	}
	round()
	e.enqueue(poison, behind)
	round()
	e.waitStatus(poison.ID, outbox.StatusDeadLetter, 30*time.Second)
	round()
	recs := consumed(t, e.addrs, e.topic, 60, 30*time.Second)
	checkOrder(t, recs, want)   // fails on a record of P too: P's first record would be its n 1
	time.Sleep(2 * time.Second) // a few polls and lease periods
	if st := e.status(behind.ID).Status; st == outbox.StatusSent || st == outbox.StatusInFlight {
		t.Fatalf("the message behind the dead letter is %s; want it unsent", st)
	}
	if n := e.copies(behind.ID, 0, time.Second); n != 0 {
		t.Fatalf("the message behind the dead letter is on the topic %d times", n)
	}

	o, err := ops.New(e.pool, ops.Config{Schema: e.schema})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Discard(context.Background(), ops.Request{IDs: []uuid.UUID{poison.ID}, Reason: "e2e: too large"}); err != nil {
		t.Fatal(err)
	}
	e.waitSentOnce(behind.ID, "after the discard, the message behind it")
}

// A transaction that took its seq before later ones and commits after
// they were published is published too: no relay's progress skipped it.
func suiteLateCommit(t *testing.T, s strategy) {
	e := newSuiteEnv(t, s, broker.Config{})
	e.publishingRelay("A", nil)
	e.relay("B", nil)
	ctx := context.Background()
	late := seqMessage("late", 0)
	late.ID = uuid.Must(uuid.NewV7())
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }() // after the commit: a no-op
	if err := e.store.Enqueue(ctx, tx, late); err != nil {
		t.Fatal(err)
	}
	want, total := e.enqueueRounds(5, 4)
	checkOrder(t, consumed(t, e.addrs, e.topic, total, 30*time.Second), want)
	time.Sleep(2 * time.Second) // longer than the cursor's gap grace, several polls
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitSentOnce(late.ID, "the late commit")
}

// A relay dies after the broker acknowledged a message and before it
// recorded that: the message is sent again (a duplicate, never a loss),
// and ends SENT. Claim and cursor relays stop at the failpoint
// relay-after-ack; the CDC relay's record of the message is held back by a
// row lock, and its connections are terminated with it, as they would end
// with a process that dies before it sends the record.
func suiteKillAfterAck(t *testing.T, s strategy) {
	e := newSuiteEnv(t, s, broker.Config{})
	m := oneMessage(t)
	var a *proc
	release := func() {}
	if s.name == "cdc" {
		a, release = e.cdcRelayHeldAfterAck(m)
	} else {
		e.enqueue(m)
		a = e.relay("A", []string{"OUTBOX_FAILPOINT=relay-after-ack"})
		a.waitFor("FAILPOINT relay-after-ack", 30*time.Second)
	}
	if n := e.copies(m.ID, 1, 0); n != 1 {
		t.Fatalf("before the kill the broker has %d copies; want 1 (acknowledged)", n)
	}
	if st := e.status(m.ID).Status; st == outbox.StatusSent {
		t.Fatalf("the message is SENT before the relay recorded it")
	}
	a.kill()
	e.terminate("A")
	release()
	e.relay("B", nil)
	e.waitStatus(m.ID, outbox.StatusSent, 30*time.Second)
	if n := e.copies(m.ID, 2, 2*time.Second); n != 2 {
		t.Fatalf("%d copies on the topic; want 2 (the first send and the one after the kill)", n)
	}
}

// cdcRelayHeldAfterAck starts CDC relay A, enqueues m while A is stopped
// (SIGSTOP) and locks m's row, so that A, resumed, streams m, publishes it
// and then waits for the lock in the statement that records it; it returns
// A once it waits there, and release, which lets the lock go.
func (e *suiteEnv) cdcRelayHeldAfterAck(m outbox.Message) (a *proc, release func()) {
	e.t.Helper()
	a = e.publishingRelay("A", nil)
	ctx := context.Background()
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		e.t.Fatal(err)
	}
	e.enqueue(m)
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	release = func() { _ = tx.Rollback(context.Background()) }
	e.t.Cleanup(release)
	if _, err := tx.Exec(ctx, "SELECT 1 FROM outbox_messages WHERE id = $1 FOR UPDATE", m.ID); err != nil {
		e.t.Fatal(err)
	}
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		e.t.Fatal(err)
	}
	e.copies(m.ID, 1, 0)
	waitFor(e.t, "A's record of the message waiting for the row lock", 10*time.Second, func() bool {
		var n int
		err := e.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`,
			e.appName("A")).Scan(&n)
		return err == nil && n > 0
	})
	return a, release
}

// terminate ends the server sessions of relay id's connections (after the
// process was killed, a session blocked in a statement lives on until it
// next talks to its client).
func (e *suiteEnv) terminate(id string) {
	e.t.Helper()
	_, err := e.pool.Exec(context.Background(),
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", e.appName(id))
	if err != nil {
		e.t.Fatal(err)
	}
}

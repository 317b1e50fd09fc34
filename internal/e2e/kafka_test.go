package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/internal/freeport"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/relay/claim"
	"github.com/outbox-dev/outbox/relay/cursor"
	relaystrategy "github.com/outbox-dev/outbox/relay/strategy"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/sink/kafka"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

type seqPayload struct {
	Aggregate string `json:"aggregate"`
	N         int    `json:"n"`
}

func seqMessage(agg string, n int) outbox.Message {
	p, _ := json.Marshal(seqPayload{Aggregate: agg, N: n})
	return outbox.Message{AggregateType: "Order", AggregateID: agg, EventType: "OrderEvent", Payload: p}
}

// runRelay runs an in-process relay with a Kafka sink until the test ends.
func runRelay(t *testing.T, q store.Queue, addrs []string, topic string, mod func(*relay.Config), wrap func(sink.Sink) sink.Sink) {
	t.Helper()
	ks, err := kafka.New(kafka.Config{Brokers: addrs, DefaultTopic: topic, AllowAutoTopicCreation: true, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	var s sink.Sink = ks
	if wrap != nil {
		s = wrap(ks)
	}
	cfg := relay.Config{Strategy: strategyFor(q), Sink: s, PollInterval: 100 * time.Millisecond, Lease: 5 * time.Second,
		RetryBase: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond, Logger: quietLogger()}
	if mod != nil {
		mod(&cfg)
	}
	t.Cleanup(func() { ks.Close() }) // after the relay stopped
	startTestRelay(t, cfg)
}

// checkOrder asserts that every (aggregate, n) in want was delivered and
// that the first delivery of each aggregate's events is in n order. It
// returns the number of duplicates.
func checkOrder(t *testing.T, recs []*kgo.Record, want map[string]int) int {
	t.Helper()
	next := map[string]int{}
	seen := map[string]bool{}
	dups := 0
	for _, r := range recs {
		var p seqPayload
		if err := json.Unmarshal(r.Value, &p); err != nil {
			t.Fatalf("bad payload %q: %v", r.Value, err)
		}
		if string(r.Key) != p.Aggregate {
			t.Fatalf("record key %q; want the aggregate id %q", r.Key, p.Aggregate)
		}
		id := header(r, "eventId")
		if seen[id] {
			dups++
			continue
		}
		seen[id] = true
		if p.N != next[p.Aggregate] {
			t.Fatalf("aggregate %s: first delivery of event %d came when %d was expected next: order broken", p.Aggregate, p.N, next[p.Aggregate])
		}
		next[p.Aggregate]++
	}
	for agg, n := range want {
		if next[agg] != n {
			t.Fatalf("aggregate %s: %d of %d events delivered", agg, next[agg], n)
		}
	}
	return dups
}

// Three relays at once over 10,000 messages on 200 aggregates, enqueued
// while they run: every message is delivered and the order of each
// aggregate holds in the broker.
func TestThreeRelays_DeliverEverythingInOrderPerAggregate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const aggregates, perAggregate = 200, 50
	for range 3 {
		st, err := pgstore.New(pgtest.Pool(t, e.schema), pgstore.Config{Schema: e.schema})
		if err != nil {
			t.Fatal(err)
		}
		runRelay(t, st, e.addrs, e.topic, func(c *relay.Config) { c.BatchSize = 50 }, nil)
	}
	want, total := e.enqueueRounds(aggregates, perAggregate)
	recs := consumed(t, e.addrs, e.topic, total, 120*time.Second)
	if len(recs) < total {
		t.Fatalf("%d of %d records delivered", len(recs), total)
	}
	dups := checkOrder(t, recs, want)
	t.Logf("%d records, %d duplicates", len(recs), dups)
}

// countingSink counts Publish calls, to show there is no busy loop.
type countingSink struct {
	sink.Sink
	calls atomic.Int64
}

func (c *countingSink) Publish(ctx context.Context, recs []outbox.Record) []error {
	c.calls.Add(1)
	return c.Sink.Publish(ctx, recs)
}

// The broker goes down for a while and comes back on the same address with
// its data: everything is delivered, in order, no attempt is counted
// against the messages, and the relay does not spin meanwhile.
func TestBrokerDownThenBack_DeliversInOrderWithoutBusyLoop(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Schema(t)
	st, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	listen, err := freeport.Addr() // the broker listens there again after its restart
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.Start(broker.Config{Listen: listen, DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	addrs := b.Addrs()
	topic := "down." + schema
	counter := &countingSink{}
	runRelay(t, st, addrs, topic, func(c *relay.Config) { c.Lease = 4 * time.Second }, func(s sink.Sink) sink.Sink {
		counter.Sink = s
		return counter
	})
	e := &env{t: t, pool: pool, store: st, schema: schema, addrs: addrs, topic: topic}
	want := map[string]int{}
	enqueueRound := func(round int) {
		var batch []outbox.Message
		for a := range 20 {
			agg := fmt.Sprintf("d-%02d", a)
			batch = append(batch, seqMessage(agg, round))
			want[agg]++
		}
		e.enqueue(batch...)
	}
	enqueueRound(0)
	if got := consumed(t, addrs, topic, 20, 30*time.Second); len(got) < 20 {
		t.Fatalf("before the outage: %d of 20 delivered", len(got))
	}

	b.Close()
	before := counter.calls.Load()
	for round := 1; round <= 5; round++ {
		enqueueRound(round)
	}
	const outage = 6 * time.Second
	time.Sleep(outage)
	during := counter.calls.Load() - before
	// Two workers pausing 0.5s, 1s, 2s, 4s... make a handful of attempts;
	// a busy loop would make hundreds.
	if during > 30 {
		t.Fatalf("%d publish calls during a %s outage: busy loop", during, outage)
	}

	b2, err := broker.Start(broker.Config{Listen: addrs[0], DataDir: dataDir})
	if err != nil {
		t.Fatalf("restart broker on %s: %v", addrs[0], err)
	}
	t.Cleanup(b2.Close)
	recs := consumed(t, addrs, topic, 120, 60*time.Second)
	checkOrder(t, recs, want)

	var counted int
	q := fmt.Sprintf("SELECT count(*) FROM %s.outbox_messages WHERE attempts > 0 OR status = 'DEAD_LETTER'", pgx.Identifier{schema}.Sanitize())
	if err := pool.QueryRow(context.Background(), q).Scan(&counted); err != nil {
		t.Fatal(err)
	}
	if counted != 0 {
		t.Fatalf("%d messages had attempts counted or were dead-lettered for a broker outage", counted)
	}
	t.Logf("%d publish calls during the outage", during)
}

// A message too large for the broker dead-letters at once with the
// broker's reason; other aggregates are unaffected; later messages of its
// aggregate wait behind it.
func TestPoisonMessage_TooLarge_DeadLettersWithReason(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Schema(t)
	st, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := broker.Start(broker.Config{Listen: "127.0.0.1:0", MaxMessageBytes: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	topic := "poison." + schema
	runRelay(t, st, b.Addrs(), topic, nil, nil)
	e := &env{t: t, pool: pool, store: st, schema: schema, addrs: b.Addrs(), topic: topic}

	poison := seqMessage("P", 0)
	poison.ID = uuid.Must(uuid.NewV7())
	blob := make([]byte, 40_000) // random, so that compression cannot shrink it under the limit
	_, _ = rand.Read(blob)
	poison.Payload = []byte(`{"aggregate":"P","n":0,"blob":"` + base64.StdEncoding.EncodeToString(blob) + `"}`)
	behind := seqMessage("P", 1)
	behind.ID = uuid.Must(uuid.NewV7())
	e.enqueue(poison, behind)
	want := map[string]int{}
	var batch []outbox.Message
	for a := range 30 {
		agg := fmt.Sprintf("ok-%02d", a)
		batch = append(batch, seqMessage(agg, 0), seqMessage(agg, 1))
		want[agg] = 2
	}
	e.enqueue(batch...)

	e.waitStatus(poison.ID, outbox.StatusDeadLetter, 30*time.Second)
	dead := e.status(poison.ID)
	if !strings.Contains(dead.LastError, "MESSAGE_TOO_LARGE") || dead.Attempts != 1 {
		t.Fatalf("dead letter: attempts %d, reason %q; want 1 attempt and the broker's MESSAGE_TOO_LARGE", dead.Attempts, dead.LastError)
	}
	recs := consumed(t, b.Addrs(), topic, 60, 30*time.Second)
	checkOrder(t, recs, want)
	if st := e.status(behind.ID).Status; st != outbox.StatusPending {
		t.Fatalf("message behind the dead letter is %s; want PENDING", st)
	}
	for _, r := range recs {
		if string(r.Key) == "P" {
			t.Fatalf("a record of the poisoned aggregate was published: %s", r.Value)
		}
	}
}

func newKafkaSink(addrs []string, topic string) (*kafka.Sink, error) {
	return kafka.New(kafka.Config{Brokers: addrs, DefaultTopic: topic, AllowAutoTopicCreation: true, Logger: quietLogger()})
}

// strategyFor returns the relay strategy for q: for the Queue of a cursor
// strategy that strategy, whose Close resigns the lead, else the claim
// strategy.
func strategyFor(q store.Queue) relaystrategy.Strategy {
	if c, ok := q.(*cursor.Queue); ok {
		return c.Strategy
	}
	return claim.New(q)
}

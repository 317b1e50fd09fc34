package cdc_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/relay/cdc"
	"github.com/outbox-dev/outbox/sink/kafka"
)

// Without pipelining (MaxInFlight = BatchSize: one batch at a time), two
// transactions that interleave: the one that started later commits first,
// and its message is published first. Repeated for several pairs on a
// one-partition topic, so the broker's order is the publish order. (With
// pipelining, order holds per aggregate only: TestStream_ConcurrentWriters
// and the kill tests.)
func TestStream_NoPipelining_PublishesInCommitOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t, broker.Config{Partitions: 1})
	cfg := e.config(e.newSink(nil))
	cfg.BatchSize = 100
	cfg.MaxInFlight = cfg.BatchSize
	r := e.start(cfg)
	e.waitLeader(r, 20*time.Second)

	ctx := context.Background()
	const pairs = 10
	var want []string
	for i := range pairs {
		early, err := e.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		first := seqMessage(fmtAgg(2*i), 0)
		if err := e.store.Enqueue(ctx, early, first); err != nil {
			t.Fatal(err)
		}
		later := seqMessage(fmtAgg(2*i+1), 0)
		if err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error { return e.store.Enqueue(ctx, tx, later) }); err != nil {
			t.Fatal(err)
		}
		if err := early.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		want = append(want, fmtAgg(2*i+1), fmtAgg(2*i))
	}
	recs := e.consumed(2*pairs, 30*time.Second)
	var got []string
	for _, rec := range recs {
		got = append(got, string(rec.Key))
	}
	if len(got) != len(want) {
		t.Fatalf("got %d records %v; want %v", len(got), got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("publish order %v; want commit order %v", got, want)
		}
	}
}

// Eight writers commit 2,000 messages (five per transaction) on 40
// aggregates at once, each
// serialising its aggregate with a row lock as an application would: every
// message arrives once, and each aggregate's messages in the order they
// were written. The rows end up SENT.
func TestStream_ConcurrentWriters_OrderPerAggregate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, broker.Config{})
	r := e.start(e.config(e.newSink(nil)))
	e.waitLeader(r, 20*time.Second)
	want := e.writeConcurrently(8, 40, 2000, 5)
	recs := e.consumed(2000, 60*time.Second)
	if dups := checkOrder(t, recs, want); dups != 0 {
		t.Errorf("%d duplicates without any failure", dups)
	}
	e.waitCount(outbox.StatusSent, 2000, 10*time.Second)
}

// writeConcurrently runs writers goroutines that commit total messages,
// perTx per transaction, on aggregates aggregates. Each transaction takes
// the next numbers of its aggregate from a counter row it locks, so the
// aggregate's transactions are serialised as an application's would be. It
// returns the number of messages per aggregate.
func (e *env) writeConcurrently(writers, aggregates, total, perTx int) map[string]int {
	e.t.Helper()
	ctx := context.Background()
	if _, err := e.pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS counters (agg text PRIMARY KEY, n int NOT NULL)`); err != nil {
		e.t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w * perTx; i < total; i += writers * perTx {
				agg := fmtAgg(rand.IntN(aggregates))
				k := min(perTx, total-i)
				err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
					var last int
					if err := tx.QueryRow(ctx, `INSERT INTO counters (agg, n) VALUES ($1, $2 - 1)
						ON CONFLICT (agg) DO UPDATE SET n = counters.n + $2 RETURNING n`, agg, k).Scan(&last); err != nil {
						return err
					}
					var msgs []outbox.Message
					for n := last - k + 1; n <= last; n++ {
						msgs = append(msgs, seqMessage(agg, n))
					}
					return e.store.Enqueue(ctx, tx, msgs...)
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		e.t.Fatal(err)
	}
	rows, err := e.pool.Query(ctx, `SELECT agg, n + 1 FROM counters`)
	if err != nil {
		e.t.Fatal(err)
	}
	want := map[string]int{}
	var agg string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&agg, &n}, func() error { want[agg] = n; return nil }); err != nil {
		e.t.Fatal(err)
	}
	return want
}

// The stream writes the same Kafka record as the polling relay: key,
// value and headers are kafka.Record's.
func TestStream_RecordContractIsThePollingRelays(t *testing.T) {
	t.Parallel()
	e := newEnv(t, broker.Config{})
	r := e.start(e.config(e.newSink(nil)))
	e.waitLeader(r, 20*time.Second)
	m := outbox.Message{AggregateType: "Order", AggregateID: "o-1", EventType: "OrderPlaced", EventVersion: 3,
		Payload: []byte(`{"orderId":"o-1"}`), CorrelationID: "c-1", CausationID: "k-1",
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		Headers:     map[string]string{"tenant": "t1", "b-extra": "x"}}
	e.enqueue(m)
	got := e.consumed(1, 30*time.Second)[0]

	var rec outbox.Record
	row, err := e.pool.Query(context.Background(), "SELECT id, created_at FROM outbox_messages")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pgx.ForEachRow(row, []any{&rec.ID, &rec.CreatedAt}, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	rec.Message, rec.Message.ID = m, rec.ID
	rec.ContentType = outbox.ContentTypeJSON
	want, err := kafka.Record(rec, e.topic, outbox.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Key) != string(want.Key) || string(got.Value) != string(want.Value) {
		t.Fatalf("key/value %q/%q; want %q/%q", got.Key, got.Value, want.Key, want.Value)
	}
	if len(got.Headers) != len(want.Headers) {
		t.Fatalf("headers %v; want %v", got.Headers, want.Headers)
	}
	for i, h := range want.Headers {
		if got.Headers[i].Key != h.Key || string(got.Headers[i].Value) != string(h.Value) {
			t.Fatalf("header %d is %s=%q; want %s=%q", i, got.Headers[i].Key, got.Headers[i].Value, h.Key, h.Value)
		}
	}
	var p map[string]string
	if err := json.Unmarshal(got.Value, &p); err != nil || p["orderId"] != "o-1" {
		t.Fatalf("payload %q", got.Value)
	}
}

// The in-flight bounds hold: with MaxInFlightBytes below one message's
// size, one message at a time is in flight (never two batches), and
// everything still arrives, in order per aggregate. With the default
// bounds, the same load does put several batches in flight.
func TestStream_InFlightBounds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		maxBytes int64
		slow     time.Duration
	}{
		{"one-message", 1, 5 * time.Millisecond},
		{"default", 0, 5 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, broker.Config{})
			cfg := e.config(slowSink{Sink: e.newSink(nil), max: tc.slow})
			cfg.BatchSize = 10
			cfg.MaxInFlightBytes = tc.maxBytes
			r := e.start(cfg)
			e.waitLeader(r, 20*time.Second)
			var most atomic.Int64
			stop := make(chan struct{})
			sampled := make(chan struct{})
			go func() {
				defer close(sampled)
				for {
					select {
					case <-stop:
						return
					case <-time.After(100 * time.Microsecond):
					}
					if n := cdc.BatchesInFlight(r); n > most.Load() {
						most.Store(n)
					}
				}
			}()
			want := e.writeConcurrently(4, 10, 300, 3)
			checkOrder(t, e.consumed(300, 60*time.Second), want)
			close(stop)
			<-sampled
			switch {
			case tc.maxBytes == 1 && most.Load() > 1:
				t.Fatalf("%d batches in flight with MaxInFlightBytes 1; want at most 1", most.Load())
			case tc.maxBytes == 0 && most.Load() < 2:
				t.Fatalf("at most %d batch in flight with the default bounds under load; want pipelining", most.Load())
			}
		})
	}
}

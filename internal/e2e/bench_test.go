package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// benchEnv is a migrated schema, a broker, and a store.
func benchEnv(b *testing.B) (*pgstore.Store, string, []string) {
	b.Helper()
	pool, schema := pgtest.Schema(b)
	st, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	if err := st.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	br := startBroker(b)
	return st, schema, br.Addrs()
}

// BenchmarkRelayDrain measures how fast one relay drains a backlog of b.N
// messages spread over 1,000 aggregates to the embedded broker (claim,
// publish with acks=all, mark SENT). Reported as events/s.
func BenchmarkRelayDrain(b *testing.B) {
	st, schema, addrs := benchEnv(b)
	pool := pgtest.Pool(b, schema)
	ctx := context.Background()
	const chunk = 1000
	for i := 0; i < b.N; i += chunk {
		var msgs []outbox.Message
		for j := i; j < min(i+chunk, b.N); j++ {
			msgs = append(msgs, seqMessage(fmt.Sprintf("a-%d", j%1000), j/1000))
		}
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return st.Enqueue(ctx, tx, msgs...) }); err != nil {
			b.Fatal(err)
		}
	}
	var sent sync.WaitGroup
	sent.Add(b.N)
	b.ResetTimer()
	start := time.Now()
	runRelayB(b, st, addrs, "bench."+schema, relay.Hooks{Published: func(outbox.Record, time.Duration) { sent.Done() }})
	sent.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
}

// BenchmarkCommitToAck enqueues b.N messages at a fixed rate of 500/s, one
// per transaction, and measures per message the time from the client's
// commit to the relay's mark after the broker's ack.
func BenchmarkCommitToAck(b *testing.B) {
	st, schema, addrs := benchEnv(b)
	pool := pgtest.Pool(b, schema)
	ctx := context.Background()
	var mu sync.Mutex
	committed := map[uuid.UUID]time.Time{}
	var lat []time.Duration
	var done sync.WaitGroup
	done.Add(b.N)
	// The relay may ack a message before the writer has noted its commit
	// time: whichever side comes second records the latency.
	acked := map[uuid.UUID]time.Time{}
	runRelayB(b, st, addrs, "lat."+schema, relay.Hooks{Published: func(rec outbox.Record, _ time.Duration) {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if c, ok := committed[rec.ID]; ok {
			lat = append(lat, now.Sub(c))
			delete(committed, rec.ID)
			done.Done()
		} else {
			acked[rec.ID] = now
		}
	}})
	time.Sleep(200 * time.Millisecond) // LISTEN established
	b.ResetTimer()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for i := range b.N {
		<-tick.C
		m := seqMessage(fmt.Sprintf("l-%d", i%100), i/100)
		m.ID = uuid.Must(uuid.NewV7())
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return st.Enqueue(ctx, tx, m) }); err != nil {
			b.Fatal(err)
		}
		now := time.Now()
		mu.Lock()
		if a, ok := acked[m.ID]; ok {
			lat = append(lat, max(a.Sub(now), 0))
			delete(acked, m.ID)
			done.Done()
		} else {
			committed[m.ID] = now
		}
		mu.Unlock()
	}
	done.Wait()
	b.StopTimer()
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
}

func runRelayB(b *testing.B, st *pgstore.Store, addrs []string, topic string, hooks relay.Hooks) {
	ks, err := newKafkaSink(addrs, topic)
	if err != nil {
		b.Fatal(err)
	}
	r, err := relay.New(relay.Config{Store: st, Sink: ks, Hooks: hooks, Logger: quietLogger(), BatchSize: 500, Workers: 2})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := r.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cancel()
		c, d := context.WithTimeout(context.Background(), 30*time.Second)
		defer d()
		_ = r.Stop(c)
		ks.Close()
	})
}

package cdc_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/relay/cdc"
)

// Sizes of BenchmarkPollingVsCDC.
var (
	compareBurst   = flag.Int("compare.burst", 20000, "BenchmarkPollingVsCDC: messages in the burst each relay drains")
	compareLatency = flag.Int("compare.latency", 2000, "BenchmarkPollingVsCDC: messages committed at -compare.rate for the latency measurement")
	compareRate    = flag.Int("compare.rate", 200, "BenchmarkPollingVsCDC: messages per second (one per transaction) for the latency measurement")
)

// benchModes are the relays the benchmarks compare: the polling relay
// (relay.New on pgstore, 2 workers, batches of 500), the CDC relay with one
// batch at a time (MaxInFlight = BatchSize), and the CDC relay with its
// default pipelining.
var benchModes = []string{"polling", "cdc-serial", "cdc"}

// benchRelay starts a relay of the given mode with hooks and returns a
// function that stops it.
func (e *env) benchRelay(mode string, published func(outbox.Record)) (stop func()) {
	e.t.Helper()
	snk := e.newSink(nil)
	hook := func(rec outbox.Record, _ time.Duration) { published(rec) }
	ctx := context.Background()
	if mode == "polling" {
		r, err := relay.New(relay.Config{Store: e.store, Sink: snk, BatchSize: 500, Workers: 2, Logger: quietLogger(),
			Hooks: relay.Hooks{Published: hook}})
		if err != nil {
			e.t.Fatal(err)
		}
		if err := r.Start(ctx); err != nil {
			e.t.Fatal(err)
		}
		return func() { _ = r.Stop(ctx) }
	}
	cfg := e.config(snk)
	cfg.Hooks.Published = hook
	if mode == "cdc-serial" {
		cfg.MaxInFlight = cdc.DefaultBatchSize
	}
	r, err := cdc.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		e.t.Fatal(err)
	}
	e.waitLeader(r, 30*time.Second)
	return func() { _ = r.Stop(ctx) }
}

// measureDrain commits a burst of n messages on 1,000 aggregates (1,000 per
// transaction) while no relay runs, then starts one and returns its rate,
// from its first publish to its last mark. For CDC the slot exists before
// the burst, so the burst is read from the WAL.
func measureDrain(tb testing.TB, mode string, n int) (eventsPerSec float64) {
	e := newEnv(tb, broker.Config{})
	if mode != "polling" {
		e.benchRelay(mode, func(outbox.Record) {})() // create the slot, then stop
	}
	ctx := context.Background()
	const chunk = 1000
	for i := 0; i < n; i += chunk {
		var msgs []outbox.Message
		for j := i; j < min(i+chunk, n); j++ {
			msgs = append(msgs, seqMessage(fmt.Sprintf("a-%d", j%1000), j/1000))
		}
		if err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error { return e.store.Enqueue(ctx, tx, msgs...) }); err != nil {
			tb.Fatal(err)
		}
	}
	var sent sync.WaitGroup
	sent.Add(n)
	var first sync.Once
	var start time.Time
	stop := e.benchRelay(mode, func(outbox.Record) {
		first.Do(func() { start = time.Now() })
		sent.Done()
	})
	sent.Wait()
	elapsed := time.Since(start)
	stop()
	return float64(n) / elapsed.Seconds()
}

// measureLatency commits n messages, one per transaction on 100 aggregates,
// at rate per second, and returns for each the time from the commit
// returning to the relay's mark after the broker's ack, sorted.
func measureLatency(tb testing.TB, mode string, n, rate int) []time.Duration {
	e := newEnv(tb, broker.Config{})
	ctx := context.Background()
	var mu sync.Mutex
	committed := map[uuid.UUID]time.Time{}
	var lat []time.Duration
	var done sync.WaitGroup
	done.Add(n)
	warm := uuid.Must(uuid.NewV7())
	warmed := make(chan struct{})
	stop := e.benchRelay(mode, func(rec outbox.Record) {
		now := time.Now()
		if rec.ID == warm {
			close(warmed)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if c, ok := committed[rec.ID]; ok {
			if c.IsZero() { // acked before the commit call returned
				c = now
			}
			lat = append(lat, now.Sub(c))
			delete(committed, rec.ID)
			done.Done()
		}
	})
	defer stop()
	// Warm up: the relay has caught up (the CDC stream with the WAL written
	// before, by anyone) once a first message made it through.
	m := seqMessage("warm-up", 0)
	m.ID = warm
	e.enqueue(m)
	select {
	case <-warmed:
	case <-time.After(60 * time.Second):
		tb.Fatal("warm-up message not published within 60s")
	}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for i := range n {
		<-tick.C
		m := seqMessage(fmt.Sprintf("l-%d", i%100), i/100)
		m.ID = uuid.Must(uuid.NewV7())
		mu.Lock()
		committed[m.ID] = time.Time{}
		mu.Unlock()
		if err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error { return e.store.Enqueue(ctx, tx, m) }); err != nil {
			tb.Fatal(err)
		}
		now := time.Now()
		mu.Lock()
		if _, ok := committed[m.ID]; ok { // not yet acked
			committed[m.ID] = now
		}
		mu.Unlock()
	}
	done.Wait()
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lat)
	return lat
}

func quantileMs(lat []time.Duration, p float64) float64 {
	return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000
}

// BenchmarkPollingVsCDC compares the polling relay and the CDC relay in
// one run and prints the figures side by side: the rate at which one relay
// drains a burst of -compare.burst messages, and the commit-to-ack latency
// (p50, p99, max: from the client's commit to the relay's mark after the
// broker's ack) of -compare.latency messages committed one per transaction
// at -compare.rate per second. Run it once:
//
//	go test ./cdc -run '^$' -bench PollingVsCDC -benchtime 1x
func BenchmarkPollingVsCDC(b *testing.B) {
	type row struct {
		drain float64
		lat   []time.Duration
	}
	rows := map[string]row{}
	for range b.N {
		for _, mode := range benchModes {
			rows[mode] = row{drain: measureDrain(b, mode, *compareBurst)}
		}
		for _, mode := range benchModes {
			r := rows[mode]
			r.lat = measureLatency(b, mode, *compareLatency, *compareRate)
			rows[mode] = r
		}
	}
	b.StopTimer()
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "relay\tdrain %d (events/s)\tcommit→ack p50 (ms)\tp99 (ms)\tmax (ms)\t\n", *compareBurst)
	for _, mode := range benchModes {
		r := rows[mode]
		fmt.Fprintf(w, "%s\t%.0f\t%.1f\t%.1f\t%.1f\t\n", mode, r.drain,
			quantileMs(r.lat, 0.50), quantileMs(r.lat, 0.99), quantileMs(r.lat, 1))
		b.ReportMetric(r.drain, mode+"-events/s")
		b.ReportMetric(quantileMs(r.lat, 0.50), mode+"-p50-ms")
		b.ReportMetric(quantileMs(r.lat, 0.99), mode+"-p99-ms")
	}
	w.Flush()
	fmt.Printf("(burst on 1,000 aggregates; latency: %d messages at %d/s, one per transaction, on 100 aggregates)\n",
		*compareLatency, *compareRate)
}

// BenchmarkDrain measures, per relay, how fast one relay drains a backlog
// of b.N messages spread over 1,000 aggregates to the embedded broker
// (publish with acks=all, mark SENT), in events/s from the first publish
// to the last mark.
//
//	go test ./cdc -run '^$' -bench Drain -benchtime 20000x
func BenchmarkDrain(b *testing.B) {
	for _, mode := range benchModes {
		b.Run(mode, func(b *testing.B) {
			b.ReportMetric(measureDrain(b, mode, b.N), "events/s")
		})
	}
}

// BenchmarkCommitToAck measures, per relay, the time from a client's
// commit of one message to the relay's mark after the broker's ack (p50,
// p99, max), with messages committed one per transaction at 100/s.
//
//	go test ./cdc -run '^$' -bench CommitToAck -benchtime 1000x
func BenchmarkCommitToAck(b *testing.B) {
	for _, mode := range benchModes {
		b.Run(mode, func(b *testing.B) {
			lat := measureLatency(b, mode, b.N, 100)
			b.ReportMetric(quantileMs(lat, 0.50), "p50-ms")
			b.ReportMetric(quantileMs(lat, 0.99), "p99-ms")
			b.ReportMetric(quantileMs(lat, 1), "max-ms")
		})
	}
}

package cdc_test

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
	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/cdc"
	"github.com/outbox-dev/outbox/relay"
)

// benchRelay starts a relay of the given mode ("polling" or "cdc") with
// hooks and returns a function that stops it.
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

// BenchmarkDrain measures, for the polling relay and the CDC relay in one
// run, how fast one relay drains a backlog of b.N messages spread over
// 1,000 aggregates to the embedded broker (publish with acks=all, mark
// SENT). Reported as events/s, from the first publish to the last. For CDC the backlog is committed after the
// slot exists, so it is read from the WAL.
//
//	go test ./cdc -run '^$' -bench Drain -benchtime 20000x
func BenchmarkDrain(b *testing.B) {
	for _, mode := range []string{"polling", "cdc"} {
		b.Run(mode, func(b *testing.B) {
			e := newEnv(b, broker.Config{})
			if mode == "cdc" {
				e.benchRelay(mode, func(outbox.Record) {})() // create the slot, then stop
			}
			ctx := context.Background()
			const chunk = 1000
			for i := 0; i < b.N; i += chunk {
				var msgs []outbox.Message
				for j := i; j < min(i+chunk, b.N); j++ {
					msgs = append(msgs, seqMessage(fmt.Sprintf("a-%d", j%1000), j/1000))
				}
				if err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error { return e.store.Enqueue(ctx, tx, msgs...) }); err != nil {
					b.Fatal(err)
				}
			}
			// Timed from the first publish to the last, so that the relays'
			// different start-up (a slot to attach to) does not count.
			var sent sync.WaitGroup
			sent.Add(b.N)
			var first sync.Once
			var start time.Time
			b.ResetTimer()
			stop := e.benchRelay(mode, func(outbox.Record) {
				first.Do(func() { start = time.Now() })
				sent.Done()
			})
			sent.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			stop()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
		})
	}
}

// BenchmarkCommitToAck measures, for the polling relay and the CDC relay in
// one run, the time from a client's commit of one message to the relay's
// mark after the broker's ack (p50, p99, max), with messages committed one
// per transaction at 100/s.
//
//	go test ./cdc -run '^$' -bench CommitToAck -benchtime 1000x
func BenchmarkCommitToAck(b *testing.B) {
	for _, mode := range []string{"polling", "cdc"} {
		b.Run(mode, func(b *testing.B) {
			e := newEnv(b, broker.Config{})
			ctx := context.Background()
			var mu sync.Mutex
			committed := map[uuid.UUID]time.Time{}
			var lat []time.Duration
			var done sync.WaitGroup
			done.Add(b.N)
			stop := e.benchRelay(mode, func(rec outbox.Record) {
				now := time.Now()
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
			time.Sleep(200 * time.Millisecond) // LISTEN established
			b.ResetTimer()
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for i := range b.N {
				<-tick.C
				m := seqMessage(fmt.Sprintf("l-%d", i%100), i/100)
				m.ID = uuid.Must(uuid.NewV7())
				mu.Lock()
				committed[m.ID] = time.Time{}
				mu.Unlock()
				if err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error { return e.store.Enqueue(ctx, tx, m) }); err != nil {
					b.Fatal(err)
				}
				now := time.Now()
				mu.Lock()
				if _, ok := committed[m.ID]; ok { // not yet acked
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
		})
	}
}

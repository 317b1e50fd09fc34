package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// runLatency commits cfg.Rate messages per second, one per business
// transaction, for cfg.Duration with one relay running, and measures
// commit-to-ack per message.
func (r *runner) runLatency(ctx context.Context, rep *Report) error {
	writers := r.cfg.LatencyWriters
	if writers == 0 {
		writers = latencyWriters(r.cfg.Writers, r.cfg.Rate)
	}
	s, err := r.newScenario(ctx, "latency", int32(writers+1))
	if err != nil {
		return err
	}
	defer s.close()
	if err := s.createOrders(ctx); err != nil {
		return err
	}
	defer s.vacuumEvery(ctx)()
	log := newAckLog()
	var meter workMeter
	rr, err := r.startServing(ctx, s, "bench-latency", log, meter.hooks(log.hook), meter.wire.instrument)
	if err != nil {
		return err
	}
	defer rr.stop()
	time.Sleep(settle)
	if err := s.warmUp(ctx, log, min(r.cfg.Rate, 1000)); err != nil {
		return err
	}

	rep.Latency, err = r.fixedRate(ctx, s, log, &meter, fixedRateRun{writers: writers})
	return err
}

// fixedRateRun is what fixedRate writes and how long it waits.
type fixedRateRun struct {
	// writers is the number of goroutines sharing the schedule.
	writers int
	// aggregateID is the aggregate of every message; "" puts each on the
	// order's own.
	aggregateID string
	// label prefixes the progress lines.
	label string
	// ackWait bounds the wait for acknowledgements after the writers
	// stopped; the messages still unacknowledged then count in Unacked.
	// 0: until every message is acknowledged or StallTimeout passes without
	// progress.
	ackWait time.Duration
}

// fixedRate commits cfg.Rate messages per second, one per business
// transaction, for cfg.Duration on s, served by a relay that reports to log
// and meter, and measures commit-to-ack per message.
func (r *runner) fixedRate(ctx context.Context, s *scenario, log *ackLog, meter *workMeter, run fixedRateRun) (*FixedRateReport, error) {
	writers := run.writers

	// An open schedule: message i is due at start + i/Rate, whenever the
	// one before it committed, so a slow commit does not slow the rate. The
	// first leadIn of it is not measured (see leadIn).
	total := int64(r.cfg.Duration.Seconds() * float64(r.cfg.Rate))
	interval := time.Second / time.Duration(r.cfg.Rate)
	lead := int64(leadIn / interval)
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		werr    error
		txMu    sync.Mutex
		txTimes = make([]time.Duration, 0, total)
	)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	measured := start.Add(time.Duration(lead) * interval)
	for range writers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= lead+total || wctx.Err() != nil {
					return
				}
				if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
					time.Sleep(wait)
				}
				id := uuid.Must(uuid.NewV7())
				if i < lead {
					log.warmUp(id)
				}
				began := time.Now()
				if err := s.writeOrderOn(wctx, id, run.aggregateID); err != nil {
					if wctx.Err() == nil {
						errOnce.Do(func() { werr = err })
						cancel()
					}
					return
				}
				if i < lead {
					continue
				}
				log.commit(id)
				took := time.Since(began)
				txMu.Lock()
				txTimes = append(txTimes, took)
				txMu.Unlock()
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTicker(time.Second)
	defer t.Stop()
wait:
	for {
		select {
		case <-done:
			break wait
		case <-t.C:
			r.prog.printf("%s%d/s: %d of %d committed, backlog %d", run.label, r.cfg.Rate, log.committed.Load(), total, log.backlog())
		}
	}
	elapsed := time.Since(measured)
	if werr != nil {
		return nil, fmt.Errorf("writers: %w", werr)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	committed := log.committed.Load()
	var deadline time.Time
	if run.ackWait > 0 {
		deadline = time.Now().Add(run.ackWait)
	}
	if _, err := r.awaitUntil(ctx, run.label+"acks after writing", log.published.Load, committed, time.Now(), deadline); err != nil && ctx.Err() != nil {
		return nil, err
	}
	delivery := log.latency()
	txMu.Lock()
	tx := latencyOf(txTimes)
	txMu.Unlock()
	return &FixedRateReport{
		Relay:           meter.work(log.published.Load()),
		TargetPerSecond: r.cfg.Rate, AchievedPerSecond: float64(committed) / elapsed.Seconds(), Writers: writers,
		DurationSeconds: elapsed.Seconds(), Delivery: delivery, Transactions: tx,
	}, nil
}

// leadIn is how long the latency phase's schedule runs before its messages
// are measured. Its start is the bench's own: writers that sat idle begin at
// once, and for 100-150 ms their transactions took 20-120 ms (24 writers,
// until 2026-12-05; pgbench -R 1000 with 24 clients shows the same at its
// start), while a relay that has been serving 1,000 events/s has long left
// its start behind. The lead-in also replaces, in the relay's claim rate
// (Config.LingerAbove), the warm-up's back-to-back commits by the phase's
// rate.
const leadIn = time.Second

// latencyWriters is the default number of writers of the latency phase:
// enough to keep to rate while commits take up to 8 ms on average, at least
// cfg.Writers and at most 24 (8 at 1,000/s with the default 8 writers).
//
// It was rate/40 (24 at 1,000/s, for commits of up to 25 ms) until
// 2026-12-05. More connections than a schedule needs are not free: when a
// stall lets transactions pile up, every idle writer joins in, and two
// CPUs then serve that many backends at once. pgbench -N at -R 1000 alone on
// a 2-vCPU machine: transaction p99 4.9-9.4 ms with 4 or 8 clients, 44-63
// ms with 24; this phase with 24 writers had a writers' p99 of 19-48 ms and
// a commit-to-ack p99 that followed it, with 8 writers 8-14 ms and 3.6-8.2
// ms, at the same 1,000/s (docs/performance-history.md, 2026-12-05).
func latencyWriters(writers, rate int) int {
	return max(writers, min(rate/125, 24))
}

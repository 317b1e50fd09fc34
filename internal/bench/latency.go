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
	writers := latencyWriters(r.cfg.Writers, r.cfg.Rate)
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

	// An open schedule: message i is due at start + i/Rate, whenever the
	// one before it committed, so a slow commit does not slow the rate.
	total := int64(r.cfg.Duration.Seconds() * float64(r.cfg.Rate))
	interval := time.Second / time.Duration(r.cfg.Rate)
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		werr    error
	)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	for range writers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= total || wctx.Err() != nil {
					return
				}
				if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
					time.Sleep(wait)
				}
				id := uuid.Must(uuid.NewV7())
				if err := s.writeOrder(wctx, id); err != nil {
					if wctx.Err() == nil {
						errOnce.Do(func() { werr = err })
						cancel()
					}
					return
				}
				log.commit(id)
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
			r.prog.printf("%d/s: %d of %d committed, backlog %d", r.cfg.Rate, log.committed.Load(), total, log.backlog())
		}
	}
	elapsed := time.Since(start)
	if werr != nil {
		return fmt.Errorf("writers: %w", werr)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	committed := log.committed.Load()
	if err := r.await(ctx, "acks after writing", log.published.Load, committed, time.Now()); err != nil && ctx.Err() != nil {
		return err
	}
	delivery := log.latency()
	work := meter.work(log.published.Load())
	rr.stop()
	rep.Latency = &FixedRateReport{
		Relay:           work,
		TargetPerSecond: r.cfg.Rate, AchievedPerSecond: float64(committed) / elapsed.Seconds(), Writers: writers,
		DurationSeconds: elapsed.Seconds(), Delivery: delivery,
	}
	return nil
}

// latencyWriters is the number of writers of the latency phase: enough to
// keep to rate with commits of up to 25ms (an application doing 1,000
// transactions a second has that many connections busy), at least
// cfg.Writers and at most 24, to stay well within max_connections.
func latencyWriters(writers, rate int) int {
	return max(writers, min(rate/40, 24))
}

package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// settle is how long a freshly started relay gets to open its LISTEN
// connection before writers start.
const settle = 500 * time.Millisecond

// runSteady runs cfg.Writers writers for cfg.Duration with one relay,
// between two runs of cfg.Duration/2 without a relay (whose rates are
// averaged, so that a machine getting busier or quieter during the phase
// does not pass for the relay's cost), and compares.
func (r *runner) runSteady(ctx context.Context, rep *Report) error {
	st := &SteadyReport{Writers: r.cfg.Writers, DurationSeconds: r.cfg.Duration.Seconds()}

	without, err := r.newScenario(ctx, "steady_norelay", int32(r.cfg.Writers+1))
	if err != nil {
		return err
	}
	defer without.close()
	if err := without.createOrders(ctx); err != nil {
		return err
	}
	defer without.vacuumEvery(ctx)()
	before, err := r.writeFor(ctx, without, r.cfg.Duration/2, "writers without relay (1/2)", nil)
	if err != nil {
		return err
	}

	with, err := r.newScenario(ctx, "steady_relay", int32(r.cfg.Writers+1))
	if err != nil {
		return err
	}
	defer with.close()
	if err := with.createOrders(ctx); err != nil {
		return err
	}
	stopVacuum := with.vacuumEvery(ctx)
	defer stopVacuum()
	log := newAckLog()
	var meter workMeter
	rr, err := r.startRelay(ctx, with, "bench-steady", meter.hooks(log.hook), meter.wire.instrument)
	if err != nil {
		return err
	}
	defer rr.stop()
	time.Sleep(settle)

	// Sample the backlog (committed minus acknowledged) while writing.
	var samples []sample
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	began := time.Now()
	go func() {
		defer close(sampled)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-t.C:
				samples = append(samples, sample{time.Since(began), float64(log.backlog())})
			}
		}
	}()
	txs, err := r.writeFor(ctx, with, r.cfg.Duration, "writers with relay", log)
	close(stopSampling)
	<-sampled
	if err != nil {
		return err
	}
	st.WithRelayTxPerSecond = txs

	var trend []sample
	for _, s := range samples {
		if s.at >= time.Second {
			if len(trend) == 0 {
				st.BacklogStart = int64(s.value)
			}
			trend = append(trend, s)
		}
		st.BacklogMax = max(st.BacklogMax, int64(s.value))
	}
	if len(samples) > 0 {
		st.BacklogEnd = int64(samples[len(samples)-1].value)
	}
	st.BacklogTrendPerSecond = slope(trend)
	st.BacklogGrows = st.BacklogTrendPerSecond > GoalBacklogTrend*st.WithRelayTxPerSecond

	// Wait for the rest to be acknowledged, so every latency counts.
	committed := log.committed.Load()
	if err := r.await(ctx, "acks after writing", log.published.Load, committed, time.Now()); err != nil && ctx.Err() != nil {
		return err
	}
	st.CommitToAck, st.Unacked = log.latency()
	st.Relay = meter.work(log.published.Load())
	rr.stop()

	after, err := r.writeFor(ctx, without, r.cfg.Duration/2, "writers without relay (2/2)", nil)
	if err != nil {
		return err
	}
	st.WithoutRelayTxPerSecond = (before + after) / 2
	st.ThroughputLossPercent = 100 * (1 - ratio(st.WithRelayTxPerSecond, st.WithoutRelayTxPerSecond))
	rep.Steady = st
	return nil
}

// writeFor runs cfg.Writers goroutines committing business transactions
// back to back for d, recording commits in log if not nil, and returns
// committed transactions per second.
func (r *runner) writeFor(ctx context.Context, s *scenario, d time.Duration, label string, log *ackLog) (float64, error) {
	var (
		count   atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		werr    error
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	deadline := start.Add(d)
	for range r.cfg.Writers {
		wg.Go(func() {
			for time.Now().Before(deadline) && ctx.Err() == nil {
				id := uuid.Must(uuid.NewV7())
				if err := s.writeOrder(ctx, id); err != nil {
					if ctx.Err() == nil {
						errOnce.Do(func() { werr = fmt.Errorf("%s: %w", label, err) })
						cancel()
					}
					return
				}
				if log != nil {
					log.commit(id)
				}
				count.Add(1)
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-done:
			if werr != nil {
				return 0, werr
			}
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			return float64(count.Load()) / time.Since(start).Seconds(), nil
		case <-t.C:
			el := time.Since(start).Seconds()
			msg := fmt.Sprintf("%s: %s tx/s", label, human(float64(count.Load())/el))
			if log != nil {
				msg += fmt.Sprintf(", backlog %d", log.backlog())
			}
			r.prog.printf("%s", msg)
		}
	}
}

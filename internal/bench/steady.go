package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// settle is how long a freshly started relay gets to open its LISTEN
// connection before writers start.
const settle = 500 * time.Millisecond

// steadyPairs is how many times the steady phase's writers switch from the
// table without a relay to the one with a relay: 8 since 2026-12-06 (4
// before). On the bench's shared 2-core machines single comparisons moved
// by 5-20 points (-5, 18, 3, 18%), so that the median of four followed one
// neighbour's burst; the median of eight moves half as far.
const steadyPairs = 8

// steadySegments is how many segments with the relay last Config.Duration.
const steadySegments = 4

// runSteady runs cfg.Writers writers at full speed, alternating between two
// tables: one that no relay serves and one that a running relay serves, in
// 2*steadyPairs+1 segments (without, with, without, ..., without) of
// cfg.Duration/steadySegments each. Each segment with the relay is
// compared with the mean of its two neighbours without, and the median of
// those comparisons is the throughput loss: this 2-core machine's
// throughput drifts by 10-20% between runs of a few seconds, more than the
// effect being measured, and neighbouring short segments see the same
// drift. While the writers use the other table the relay has nothing to do
// (it polls once a second, like an idle relay).
func (r *runner) runSteady(ctx context.Context, rep *Report) error {
	segment := r.cfg.Duration / steadySegments
	st := &SteadyReport{Writers: r.cfg.Writers, DurationSeconds: (segment * steadyPairs).Seconds(), Segments: steadyPairs}

	without, err := r.newScenario(ctx, "steady_norelay", int32(r.cfg.Writers+1))
	if err != nil {
		return err
	}
	defer without.close()
	if err := without.createOrders(ctx); err != nil {
		return err
	}
	defer without.vacuumEvery(ctx)()

	with, err := r.newScenario(ctx, "steady_relay", int32(r.cfg.Writers+1))
	if err != nil {
		return err
	}
	defer with.close()
	if err := with.createOrders(ctx); err != nil {
		return err
	}
	defer with.vacuumEvery(ctx)()
	log := newAckLog()
	var meter workMeter
	rr, err := r.startServing(ctx, with, "bench-steady", log, meter.hooks(log.hook), meter.wire.instrument)
	if err != nil {
		return err
	}
	defer rr.stop()
	time.Sleep(settle)

	var (
		rates  []float64 // tx/s of each segment without the relay
		slopes []float64 // backlog trend within each segment with it
	)
	// The writers do the same bookkeeping in every segment (a commit log
	// and the backlog sampler), so that only the relay differs: without it,
	// a scratch log no relay acknowledges. Measured with a relay that does
	// nothing, the bookkeeping alone made the segments with the relay about
	// 5% slower.
	scratch := newAckLog()
	// The machine's CPU use in the segments without the relay: what a
	// business transaction costs (see SteadyReport.WritersCPUMicrosPerTx).
	var writersCPU []cpuUse
	writeWithout := func(label string) (float64, error) {
		var txs float64
		use, err := measureCPU(func() (float64, error) {
			var err error
			txs, err = r.bookkeptWrite(ctx, without, segment, label, scratch)
			return txs * segment.Seconds(), err
		})
		writersCPU = append(writersCPU, use)
		return txs, err
	}
	// A pair of segments that is not measured, one on each table, so that
	// the relay's first load (its connections' backends preparing
	// statements, its producer's first requests to the broker) is not. Its
	// messages are acknowledged like any other but not measured. (The
	// first measured segment with the relay still loses more than the
	// others, with this pair as without it: docs/performance-history.md.)
	if _, _, err := r.writeFor(ctx, without, segment, "warm-up without relay", nil, false); err != nil {
		return err
	}
	if _, _, err := r.writeFor(ctx, with, segment, "warm-up with relay", log, true); err != nil {
		return err
	}
	first, err := writeWithout("writers without relay (1)")
	if err != nil {
		return err
	}
	rates = append(rates, first)
	for i := range steadyPairs {
		samples, txs, n, err := r.sampledWrite(ctx, with, segment, fmt.Sprintf("writers with relay (%d/%d)", i+1, steadyPairs), log)
		if err != nil {
			return err
		}
		st.SegmentTxPerSecond = append(st.SegmentTxPerSecond, txs)
		st.SegmentTransactions = append(st.SegmentTransactions, n)
		// The trend within the segment, from its second sample on (the
		// relay wakes from idle at the segment's start).
		if len(samples) > 2 {
			slopes = append(slopes, slope(samples[1:]))
			if i == 0 {
				st.BacklogStart = int64(samples[1].value)
			}
		}
		for _, s := range samples {
			st.BacklogMax = max(st.BacklogMax, int64(s.value))
		}
		if len(samples) > 0 {
			st.BacklogEnd = int64(samples[len(samples)-1].value)
		}
		next, err := writeWithout(fmt.Sprintf("writers without relay (%d)", i+2))
		if err != nil {
			return err
		}
		rates = append(rates, next)
		st.SegmentLossPercent = append(st.SegmentLossPercent, 100*(1-ratio(txs, (rates[i]+rates[i+1])/2)))
	}
	st.WithoutSegmentTxPerSecond = rates
	st.WithRelayTxPerSecond = mean(st.SegmentTxPerSecond)
	st.WithoutRelayTxPerSecond = mean(rates)
	st.ThroughputLossPercent = median(st.SegmentLossPercent)
	st.BacklogTrendPerSecond = mean(slopes)
	st.BacklogGrows = st.BacklogTrendPerSecond > GoalBacklogTrend*st.WithRelayTxPerSecond
	wc := sumCPU(writersCPU)
	st.WritersCPUMicrosPerTx, st.WritersCPUBusyPercent = wc.microsPerUnit(), wc.busyPercent()

	// Wait for the rest to be acknowledged, so every latency counts.
	committed := log.committed.Load()
	if err := r.await(ctx, "acks after writing", log.published.Load, committed, time.Now()); err != nil && ctx.Err() != nil {
		return err
	}
	st.Delivery = log.latency()
	st.Relay = meter.work(log.published.Load())
	rep.Steady = st
	return nil
}

// bookkeptWrite is sampledWrite for a segment without the relay: the same
// work, with the samples thrown away.
func (r *runner) bookkeptWrite(ctx context.Context, s *scenario, d time.Duration, label string, log *ackLog) (float64, error) {
	_, txs, _, err := r.sampledWrite(ctx, s, d, label, log)
	return txs, err
}

// sampledWrite is writeFor on the relay's table, sampling the backlog
// (committed minus acknowledged) every 250 ms meanwhile. It returns the
// samples, the rate and the number of transactions.
func (r *runner) sampledWrite(ctx context.Context, s *scenario, d time.Duration, label string, log *ackLog) ([]sample, float64, int64, error) {
	var samples []sample
	stop := make(chan struct{})
	stopped := make(chan struct{})
	began := time.Now()
	go func() {
		defer close(stopped)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				samples = append(samples, sample{time.Since(began), float64(log.backlog())})
			}
		}
	}()
	txs, n, err := r.writeFor(ctx, s, d, label, log, false)
	close(stop)
	<-stopped
	return samples, txs, n, err
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// writeFor runs cfg.Writers goroutines committing business transactions
// back to back for d, recording commits in log if not nil, and returns
// committed transactions per second and their number (the last ones end a
// little after d). With warm, the messages are warm-up
// messages of log ([ackLog.warmUp]): acknowledged, not measured.
func (r *runner) writeFor(ctx context.Context, s *scenario, d time.Duration, label string, log *ackLog, warm bool) (float64, int64, error) {
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
				if warm && log != nil {
					log.warmUp(id)
				}
				if err := s.writeOrder(ctx, id); err != nil {
					if ctx.Err() == nil {
						errOnce.Do(func() { werr = fmt.Errorf("%s: %w", label, err) })
						cancel()
					}
					return
				}
				if log != nil && !warm {
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
				return 0, 0, werr
			}
			if err := ctx.Err(); err != nil {
				return 0, 0, err
			}
			n := count.Load()
			return float64(n) / time.Since(start).Seconds(), n, nil
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

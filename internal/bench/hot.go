package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// The hot phase's skew.
const (
	// HotZipfExponent is the exponent s of the hot phase's Zipf-skewed
	// backlog: message i is on aggregate k (0 to Config.Aggregates-1) with
	// a probability proportional to (k+1)^-s. Over 10,000 aggregates the
	// busiest holds about 15% of the messages and the ten busiest about
	// 41%.
	HotZipfExponent = 1.1
	// HotFewAggregates is the number of aggregates of the hot phase's
	// backlog on a few aggregates.
	HotFewAggregates = 10
	// HotBudgetFactor times the spread backlog's drain time is how long the
	// hot phase drains each skewed backlog at most (see Config.HotDrainLimit):
	// twice the time a drain at GoalHotZipfRatio of the spread rate takes,
	// so that a drain that meets that goal is never stopped.
	HotBudgetFactor = 2 / GoalHotZipfRatio
	// HotMinBudget is the least time the hot phase gives a skewed drain
	// (HotDrainLimit permitting): a spread drain of a fraction of a second
	// would leave the others too little time to give a rate.
	HotMinBudget = 3 * time.Second
)

// hotZipfSeed seeds the Zipf-skewed backlog, so that every run drains the
// same backlog.
const hotZipfSeed = 37

// hotAggregateID is the one aggregate of the hot phase's fixed-rate writes.
const hotAggregateID = "order-hot"

// hotAckWait bounds the wait for acknowledgements after the hot phase's
// fixed-rate writers stopped: a relay that meets the latency goals has
// acknowledged everything within milliseconds, and one that falls behind
// on the aggregate would otherwise hold the phase until its backlog is
// gone. What is unacknowledged then counts in Unacked.
const hotAckWait = 5 * time.Second

// hotBacklog is one of the hot phase's backlogs.
type hotBacklog struct {
	tag   string // in schema names and relay ids
	label string // for progress lines
	// aggregateOf is the aggregate number of message i.
	aggregateOf func(i int) int
}

// hotBacklogs are the hot phase's four backlogs of n messages: spread round
// robin over aggregates (the reference), on 1 aggregate, on
// HotFewAggregates, and Zipf-skewed over aggregates.
func hotBacklogs(n, aggregates int) (spread, one, few, zipf hotBacklog) {
	z := zipfAggregates(n, aggregates, HotZipfExponent, hotZipfSeed)
	spread = hotBacklog{"spread", fmt.Sprintf("%s aggregates", human(float64(aggregates))), func(i int) int { return i % aggregates }}
	one = hotBacklog{"one", "1 aggregate", func(int) int { return 0 }}
	few = hotBacklog{"few", fmt.Sprintf("%d aggregates", HotFewAggregates), func(i int) int { return i % HotFewAggregates }}
	zipf = hotBacklog{"zipf", fmt.Sprintf("Zipf s=%g over %s aggregates", HotZipfExponent, human(float64(aggregates))), func(i int) int { return z[i] }}
	return spread, one, few, zipf
}

// zipfAggregates returns the aggregate numbers of n messages drawn from a
// Zipf distribution with exponent s over aggregates aggregates: number k
// (0 to aggregates-1) with a probability proportional to (k+1)^-s. The same
// seed gives the same numbers. s must be greater than 1.
func zipfAggregates(n, aggregates int, s float64, seed uint64) []int {
	z := rand.NewZipf(rand.New(rand.NewPCG(seed, seed)), s, 1, uint64(max(aggregates, 1)-1))
	out := make([]int, n)
	for i := range out {
		out[i] = int(z.Uint64())
	}
	return out
}

// backlogShape returns how many distinct aggregates n messages placed by
// aggregateOf are on, and the share of them on the busiest.
func backlogShape(n int, aggregateOf func(i int) int) (aggregates int, busiest float64) {
	if n == 0 {
		return 0, 0
	}
	counts := map[int]int{}
	most := 0
	for i := range n {
		k := aggregateOf(i)
		counts[k]++
		most = max(most, counts[k])
	}
	return len(counts), float64(most) / float64(n)
}

// hotBudget is how long a skewed drain runs at most after a spread drain
// that took spread: HotBudgetFactor times as long, at least HotMinBudget,
// at most limit.
func hotBudget(spread, limit time.Duration) time.Duration {
	return min(limit, max(HotMinBudget, time.Duration(HotBudgetFactor*float64(spread))))
}

// runHot measures each of cfg.HotStrategies on hot aggregates.
func (r *runner) runHot(ctx context.Context, rep *Report) error {
	h := &HotReport{
		Messages: r.cfg.HotBacklog, Aggregates: r.cfg.Aggregates, FewAggregates: HotFewAggregates,
		ZipfExponent: HotZipfExponent, DrainLimitSeconds: r.cfg.HotDrainLimit.Seconds(),
	}
	for _, st := range r.cfg.HotStrategies {
		sr, err := r.hotStrategy(ctx, st)
		if err != nil {
			return fmt.Errorf("%s mode: %w", st, err)
		}
		h.Strategies = append(h.Strategies, sr)
	}
	rep.Hot = h
	return nil
}

// hotStrategy drains the four backlogs with one relay of strategy st, the
// spread one to the end and the others within the budget its time sets,
// and measures commit-to-ack on one aggregate.
func (r *runner) hotStrategy(ctx context.Context, st Strategy) (HotStrategyReport, error) {
	spreadB, oneB, fewB, zipfB := hotBacklogs(r.cfg.HotBacklog, r.cfg.Aggregates)
	sr := HotStrategyReport{Strategy: st}
	var err error
	if sr.Spread, err = r.hotDrain(ctx, st, spreadB, 0); err != nil {
		return sr, fmt.Errorf("drain on %s: %w", spreadB.label, err)
	}
	budget := hotBudget(time.Duration(sr.Spread.Seconds*float64(time.Second)), r.cfg.HotDrainLimit)
	sr.BudgetSeconds = budget.Seconds()
	for _, d := range []struct {
		b   hotBacklog
		dst *HotDrain
	}{{oneB, &sr.OneAggregate}, {fewB, &sr.FewAggregates}, {zipfB, &sr.Zipf}} {
		if *d.dst, err = r.hotDrain(ctx, st, d.b, budget); err != nil {
			return sr, fmt.Errorf("drain on %s: %w", d.b.label, err)
		}
		d.dst.Ratio = ratio(d.dst.PerSecond, sr.Spread.PerSecond)
	}
	if sr.OneAggregateLatency, err = r.hotLatency(ctx, st); err != nil {
		return sr, fmt.Errorf("commit-to-ack on 1 aggregate: %w", err)
	}
	return sr, nil
}

// storeMode is the outbox mode that runs st.
func (st Strategy) storeMode() pgstore.Mode {
	if st == StrategyCursor {
		return pgstore.ModeCursor
	}
	return pgstore.ModeClaim
}

// hotDrain loads backlog b (cfg.HotBacklog messages) in a fresh schema in
// st's mode and drains it with one relay until it is drained or, with a
// positive budget, budget has passed. The rate is over the messages
// drained, from the relay's start.
func (r *runner) hotDrain(ctx context.Context, st Strategy, b hotBacklog, budget time.Duration) (HotDrain, error) {
	n := r.cfg.HotBacklog
	d := HotDrain{Messages: n}
	d.Aggregates, d.BusiestShare = backlogShape(n, b.aggregateOf)
	s, err := r.newScenarioIn(ctx, "hot"+b.tag, 2, st.storeMode())
	if err != nil {
		return d, err
	}
	defer s.close()
	label := fmt.Sprintf("%s mode, %s", st, b.label)
	if err := s.loadBacklogOn(ctx, n, b.aggregateOf, label); err != nil {
		return d, err
	}
	if err := s.analyze(ctx); err != nil {
		return d, err
	}
	var published, failed atomic.Int64
	hooks := relay.Hooks{
		Published: func(outbox.Record, time.Duration) { published.Add(1) },
		Failed:    func(outbox.Record, error, bool) { failed.Add(1) },
	}
	want := int64(n)
	start := time.Now()
	var deadline time.Time
	if budget > 0 {
		deadline = start.Add(budget)
	}
	rr, err := r.startRelay(ctx, s, fmt.Sprintf("bench-hot-%s-%s", st, b.tag), nil, hooks, nil)
	if err != nil {
		return d, err
	}
	defer rr.stop()
	done, err := r.awaitUntil(ctx, label+" to Kafka", published.Load, want, start, deadline)
	elapsed := time.Since(start)
	drained := min(published.Load(), want)
	if errors.Is(err, errStalled) && failed.Load() > 0 {
		err = fmt.Errorf("%w (%d publishes failed)", err, failed.Load())
	}
	if err != nil {
		return d, err
	}
	rr.stop()
	if done {
		if err := s.checkAllSent(ctx, want); err != nil {
			return d, err
		}
	}
	d.Drained, d.Complete, d.Seconds = drained, done, elapsed.Seconds()
	d.PerSecond = float64(drained) / elapsed.Seconds()
	d.FailedPublishes = failed.Load()
	return d, nil
}

// hotLatency commits cfg.Rate messages per second for cfg.Duration, every
// one on the same aggregate, with one relay of strategy st, and measures
// commit-to-ack as the latency phase does (its warm-up is on the orders'
// own aggregates). It waits hotAckWait at most for the acknowledgements
// after the writers stopped.
func (r *runner) hotLatency(ctx context.Context, st Strategy) (*FixedRateReport, error) {
	writers := r.cfg.LatencyWriters
	if writers == 0 {
		writers = latencyWriters(r.cfg.Writers, r.cfg.Rate)
	}
	s, err := r.newScenarioIn(ctx, "hotlatency", int32(writers+1), st.storeMode())
	if err != nil {
		return nil, err
	}
	defer s.close()
	if err := s.createOrders(ctx); err != nil {
		return nil, err
	}
	defer s.vacuumEvery(ctx)()
	log := newAckLog()
	var meter workMeter
	rr, err := r.startRelay(ctx, s, fmt.Sprintf("bench-hot-%s-latency", st), log, meter.hooks(log.hook), meter.wire.instrument)
	if err != nil {
		return nil, err
	}
	defer rr.stop()
	time.Sleep(settle)
	if err := s.warmUp(ctx, log, min(r.cfg.Rate, 1000)); err != nil {
		return nil, err
	}
	return r.fixedRate(ctx, s, log, &meter, fixedRateRun{
		writers: writers, aggregateID: hotAggregateID, label: fmt.Sprintf("%s mode, 1 aggregate, ", st), ackWait: hotAckWait,
	})
}

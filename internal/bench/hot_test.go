package bench

import (
	"bytes"
	"context"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// The Zipf-skewed backlog is the same in every run, stays within the
// aggregates, and is skewed as a Zipf distribution with exponent 1.1 over
// 10,000 aggregates is: the busiest aggregate holds 1/H of the messages
// and the ten busiest sum_{k<=10} k^-1.1 / H, with H = sum_{k<=10,000}
// k^-1.1 (15.1% and 40.6%), and the busiest is aggregate 0.
func TestZipfAggregates_SameSeedSameSkew(t *testing.T) {
	t.Parallel()
	const n, aggregates = 50_000, 10_000
	a := zipfAggregates(n, aggregates, HotZipfExponent, hotZipfSeed)
	if b := zipfAggregates(n, aggregates, HotZipfExponent, hotZipfSeed); !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave another backlog")
	}
	if c := zipfAggregates(n, aggregates, HotZipfExponent, hotZipfSeed+1); reflect.DeepEqual(a, c) {
		t.Fatal("another seed gave the same backlog")
	}
	counts := make([]int, aggregates)
	for i, k := range a {
		if k < 0 || k >= aggregates {
			t.Fatalf("message %d on aggregate %d, outside 0..%d", i, k, aggregates-1)
		}
		counts[k]++
	}
	var h, top10 float64
	for k := 1; k <= aggregates; k++ {
		h += math.Pow(float64(k), -HotZipfExponent)
		if k <= 10 {
			top10 += math.Pow(float64(k), -HotZipfExponent)
		}
	}
	sorted := slices.Clone(counts)
	slices.Sort(sorted)
	slices.Reverse(sorted)
	if counts[0] != sorted[0] {
		t.Errorf("aggregate 0 has %d messages, the busiest %d", counts[0], sorted[0])
	}
	busiest := float64(sorted[0]) / n
	if want := 1 / h; math.Abs(busiest-want) > 0.01 {
		t.Errorf("busiest aggregate holds %.3f of the messages, want %.3f", busiest, want)
	}
	var ten int
	for _, c := range sorted[:10] {
		ten += c
	}
	if got, want := float64(ten)/n, top10/h; math.Abs(got-want) > 0.015 {
		t.Errorf("ten busiest hold %.3f of the messages, want %.3f", got, want)
	}
	if _, share := backlogShape(n, func(i int) int { return a[i] }); share != busiest {
		t.Errorf("backlogShape busiest %v, counted %v", share, busiest)
	}
}

func TestBacklogShape_CountsAggregatesAndTheBusiestShare(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		n           int
		of          func(int) int
		aggregates  int
		busiestWant float64
	}{
		{"round robin", 1000, func(i int) int { return i % 10 }, 10, 0.1},
		{"one", 1000, func(int) int { return 0 }, 1, 1},
		{"fewer messages than aggregates", 5, func(i int) int { return i % 10_000 }, 5, 0.2},
		{"three on one of four", 4, func(i int) int { return min(i, 1) }, 2, 0.75},
		{"empty", 0, func(int) int { return 0 }, 0, 0},
	} {
		aggs, busiest := backlogShape(tc.n, tc.of)
		if aggs != tc.aggregates || busiest != tc.busiestWant {
			t.Errorf("%s: %d aggregates, busiest %v; want %d and %v", tc.name, aggs, busiest, tc.aggregates, tc.busiestWant)
		}
	}
}

// A skewed drain that meets the Zipf goal is never stopped by its budget
// (unless the limit is lower): at GoalHotZipfRatio of the spread rate it
// takes spread/GoalHotZipfRatio, and the budget is twice that.
func TestHotBudget_LeavesADrainThatMeetsTheGoalTimeToFinish(t *testing.T) {
	t.Parallel()
	limit := time.Hour
	for _, spread := range []time.Duration{1200 * time.Millisecond, 2 * time.Second, 8 * time.Second, time.Minute} {
		need := time.Duration(float64(spread) / GoalHotZipfRatio)
		if got := hotBudget(spread, limit); got < 2*need-time.Millisecond || got > 2*need+time.Millisecond {
			t.Errorf("budget after a spread drain of %s: %s, want twice %s", spread, got, need)
		}
	}
	if got := hotBudget(100*time.Millisecond, limit); got != HotMinBudget {
		t.Errorf("budget after a fast spread drain: %s, want the minimum %s", got, HotMinBudget)
	}
	if got := hotBudget(time.Minute, 20*time.Second); got != 20*time.Second {
		t.Errorf("budget after a slow spread drain: %s, want the limit 20s", got)
	}
}

func hotReport(one, zipf HotDrain, lat *FixedRateReport) *HotReport {
	return &HotReport{
		Messages: 50_000, Aggregates: 10_000, FewAggregates: 10, ZipfExponent: HotZipfExponent,
		Strategies: []HotStrategyReport{{Strategy: StrategyClaim, OneAggregate: one, Zipf: zipf, OneAggregateLatency: lat}},
	}
}

// The drain on one aggregate meets its goal at 25% of the spread rate,
// drained or not (its rate is steady); the Zipf-skewed drain meets its
// goal at 80% only if it drained to the end.
func TestHotGoals_DrainRatios(t *testing.T) {
	t.Parallel()
	done := func(r float64) HotDrain { return HotDrain{Messages: 50_000, Drained: 50_000, Complete: true, Ratio: r} }
	stopped := func(r float64) HotDrain { return HotDrain{Messages: 50_000, Drained: 900, Seconds: 5, Ratio: r} }
	for _, tc := range []struct {
		name               string
		one, zipf          HotDrain
		onePass, zipfPass  bool
		oneMeasured, zipfM string
	}{
		{"both at the goal", done(0.25), done(0.80), true, true, "25%", "80%"},
		{"both below", done(0.24), done(0.79), false, false, "24%", "79%"},
		{"stopped drains", stopped(0.30), stopped(0.95), true, false,
			"30% (stopped after 5.0 s, 900 of 50,000 drained)", "95% (stopped after 5.0 s, 900 of 50,000 drained)"},
		{"one aggregate stopped below", stopped(0.01), done(1.1), false, true, "1% (stopped after 5.0 s, 900 of 50,000 drained)", "110%"},
	} {
		gs := hotGoals(hotReport(tc.one, tc.zipf, nil))
		if len(gs) != 2 {
			t.Fatalf("%s: %d goals without latency, want 2: %+v", tc.name, len(gs), gs)
		}
		one, zipf := gs[0], gs[1]
		if !strings.HasPrefix(one.Name, "hot (claim): drain on 1 aggregate vs 10,000") || !strings.HasPrefix(zipf.Name, "hot (claim): drain Zipf s=1.1 over 10,000") {
			t.Errorf("%s: goal names %q, %q", tc.name, one.Name, zipf.Name)
		}
		if one.Pass != tc.onePass || zipf.Pass != tc.zipfPass {
			t.Errorf("%s: pass %v and %v, want %v and %v", tc.name, one.Pass, zipf.Pass, tc.onePass, tc.zipfPass)
		}
		if one.Measured != tc.oneMeasured || zipf.Measured != tc.zipfM {
			t.Errorf("%s: measured %q and %q, want %q and %q", tc.name, one.Measured, zipf.Measured, tc.oneMeasured, tc.zipfM)
		}
		if one.Limit != GoalHotOneRatio || zipf.Limit != GoalHotZipfRatio || one.Value != tc.one.Ratio || zipf.Value != tc.zipf.Ratio {
			t.Errorf("%s: values and limits %+v %+v", tc.name, one, zipf)
		}
	}
}

// The one-aggregate latency goals are the latency phase's: p50 3 ms, p99
// 15 ms, at the rate asked for, with every message acknowledged.
func TestHotGoals_OneAggregateLatency(t *testing.T) {
	t.Parallel()
	d := HotDrain{Complete: true, Ratio: 1}
	for _, tc := range []struct {
		name     string
		p50, p99 float64
		achieved float64
		unacked  int
		pass     [2]bool
	}{
		{"fast", 3, 15, 1000, 0, [2]bool{true, true}},
		{"p99 over", 2, 15.5, 1000, 0, [2]bool{true, false}},
		{"p50 over", 3.1, 10, 1000, 0, [2]bool{false, true}},
		{"behind the aggregate", 1, 5, 1000, 7000, [2]bool{false, false}},
		{"rate not reached", 1, 5, 900, 0, [2]bool{false, false}},
	} {
		lat := &FixedRateReport{TargetPerSecond: 1000, AchievedPerSecond: tc.achieved,
			Delivery: Delivery{CommitToAck: Latency{Count: 10_000, P50Ms: tc.p50, P99Ms: tc.p99}, Unacked: tc.unacked}}
		gs := hotGoals(hotReport(d, d, lat))
		if len(gs) != 4 {
			t.Fatalf("%s: %d goals, want 4: %+v", tc.name, len(gs), gs)
		}
		for i, suffix := range []string{"p50", "p99"} {
			g := gs[2+i]
			if g.Name != "hot (claim): commit-to-ack at 1000/s on 1 aggregate "+suffix {
				t.Errorf("%s: goal name %q", tc.name, g.Name)
			}
			if g.Pass != tc.pass[i] {
				t.Errorf("%s: %s pass %v, want %v", tc.name, suffix, g.Pass, tc.pass[i])
			}
		}
	}
	notes := hotObservations(hotReport(d, d, &FixedRateReport{TargetPerSecond: 1000, AchievedPerSecond: 1000, Delivery: Delivery{Unacked: 7000}}))
	if len(notes) != 1 || !strings.Contains(notes[0], "7000 messages on one aggregate were not acknowledged") {
		t.Errorf("notes on a relay behind the aggregate: %q", notes)
	}
}

// Every strategy gets its own goals, named after it.
func TestHotGoals_PerStrategy(t *testing.T) {
	t.Parallel()
	d := HotDrain{Complete: true, Ratio: 1}
	lat := &FixedRateReport{TargetPerSecond: 1000, AchievedPerSecond: 1000}
	h := hotReport(d, d, lat)
	h.Strategies = append(h.Strategies, HotStrategyReport{Strategy: StrategyCursor, OneAggregate: d, Zipf: d, OneAggregateLatency: lat})
	gs := goals(Report{Hot: h})
	if len(gs) != 8 {
		t.Fatalf("%d goals for two strategies, want 8", len(gs))
	}
	for i, g := range gs {
		want := "hot (claim): "
		if i >= 4 {
			want = "hot (cursor): "
		}
		if !strings.HasPrefix(g.Name, want) {
			t.Errorf("goal %d %q, want the prefix %q", i, g.Name, want)
		}
	}
}

func TestConfig_HotStrategiesDefaultToTheRunsOwn(t *testing.T) {
	t.Parallel()
	if got := (Config{}).WithDefaults().HotStrategies; !reflect.DeepEqual(got, []Strategy{StrategyClaim}) {
		t.Errorf("claim-mode run: %v", got)
	}
	if got := (Config{Cursor: true}).WithDefaults().HotStrategies; !reflect.DeepEqual(got, []Strategy{StrategyCursor}) {
		t.Errorf("cursor-mode run: %v", got)
	}
	both := []Strategy{StrategyCursor, StrategyClaim}
	if got := (Config{HotStrategies: both}).WithDefaults().HotStrategies; !reflect.DeepEqual(got, both) {
		t.Errorf("given strategies: %v", got)
	}
}

func TestParseStrategies_AcceptsKnownNamesOnly(t *testing.T) {
	t.Parallel()
	got, err := ParseStrategies(" claim,cursor , claim")
	if err != nil || !reflect.DeepEqual(got, []Strategy{StrategyClaim, StrategyCursor}) {
		t.Errorf("ParseStrategies: %v, %v", got, err)
	}
	if got, err := ParseStrategies(""); err != nil || got != nil {
		t.Errorf("empty list: %v, %v", got, err)
	}
	if _, err := ParseStrategies("claim,cdc"); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), `"cdc"`) {
		t.Errorf("unknown strategy: %v", err)
	}
}

// The hot phase at tiny sizes, one strategy: every backlog drains or gives
// a rate, the ratios are over the spread drain, the one-aggregate writes
// are measured, and the goals and the table name the strategy.
func TestRun_HotPhase_TinySizes(t *testing.T) {
	t.Parallel()
	cfg := tinyConfig()
	cfg.Phases = []Phase{PhaseHot}
	cfg.HotStrategies = []Strategy{StrategyClaim}
	cfg.HotBacklog, cfg.Aggregates, cfg.HotDrainLimit = 300, 100, 2*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	h := rep.Hot
	if h == nil || len(h.Strategies) != 1 || h.Messages != 300 || h.Aggregates != 100 || h.ZipfExponent != HotZipfExponent {
		t.Fatalf("hot report: %+v", h)
	}
	sr := h.Strategies[0]
	if sr.Strategy != StrategyClaim || !sr.Spread.Complete || sr.Spread.Drained != 300 || sr.Spread.PerSecond <= 0 {
		t.Errorf("spread drain: %+v", sr)
	}
	if sr.BudgetSeconds != hotBudget(time.Duration(sr.Spread.Seconds*float64(time.Second)), 2*time.Second).Seconds() {
		t.Errorf("budget %v s after a spread drain of %v s", sr.BudgetSeconds, sr.Spread.Seconds)
	}
	for name, d := range map[string]HotDrain{"1 aggregate": sr.OneAggregate, "10 aggregates": sr.FewAggregates, "zipf": sr.Zipf} {
		if d.Drained < 1 || d.Seconds <= 0 || d.Seconds > sr.BudgetSeconds+1 || d.Complete != (d.Drained == 300) {
			t.Errorf("%s drain: %+v", name, d)
		}
		if d.PerSecond != float64(d.Drained)/d.Seconds || d.Ratio != d.PerSecond/sr.Spread.PerSecond {
			t.Errorf("%s drain: rate or ratio not over what drained and the spread rate: %+v", name, d)
		}
	}
	if sr.OneAggregate.Aggregates != 1 || sr.OneAggregate.BusiestShare != 1 || sr.FewAggregates.Aggregates != 10 ||
		sr.Spread.Aggregates != 100 || sr.Zipf.BusiestShare <= sr.Spread.BusiestShare {
		t.Errorf("backlog shapes: spread %+v, one %+v, few %+v, zipf %+v", sr.Spread, sr.OneAggregate, sr.FewAggregates, sr.Zipf)
	}
	if l := sr.OneAggregateLatency; l == nil || l.AchievedPerSecond <= 0 || l.CommitToAck.Count+l.Unacked != 200 {
		t.Errorf("one-aggregate latency: %+v", l)
	} else if l.CommitToAck.Count > 0 {
		checkLatency(t, "one aggregate", l.CommitToAck)
	}
	if len(rep.Goals) != 4 || !strings.HasPrefix(rep.Goals[0].Name, "hot (claim): ") {
		t.Errorf("goals: %+v", rep.Goals)
	}
	var text bytes.Buffer
	if err := WriteText(&text, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "HOT AGGREGATES, claim mode") {
		t.Errorf("table lacks the hot phase:\n%s", text.String())
	}
}

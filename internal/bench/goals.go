package bench

import (
	"fmt"
	"math"
)

// The goals, as ratios measured in the same run.
const (
	// GoalDrainRatio: backlog drain with one relay at least 70% of the
	// database-only ceiling.
	GoalDrainRatio = 0.70
	// GoalThroughputLossPercent: writer throughput drops by at most 10%
	// with the relay running.
	GoalThroughputLossPercent = 10.0
	// GoalBacklogTrend: the backlog does not grow; measured as a trend of
	// at most 1% of the write rate.
	GoalBacklogTrend = 0.01
	// GoalLatencyP50Ms and GoalLatencyP99Ms: commit-to-ack at the fixed
	// rate.
	GoalLatencyP50Ms = 3.0
	GoalLatencyP99Ms = 15.0
	// GoalLatencyRateShare: the latency goals count only if the writers
	// reached at least this share of the rate asked for (since 2026-12-05;
	// before, a lower rate was only noted).
	GoalLatencyRateShare = 0.95
	// GoalIdleRoundTripsPerSecond: at most one query per second while idle.
	GoalIdleRoundTripsPerSecond = 1.0
	// GoalClaimRatio: claim p99 with history at most 1.5x the empty
	// table's, also right after a large batch was marked.
	GoalClaimRatio = 1.5
	// GoalMemoryRatio: peak memory independent of the backlog size,
	// measured as at most 1.25x from a tenfold backlog.
	GoalMemoryRatio = 1.25
	// GoalHotOneRatio: one relay drains a backlog on one aggregate at
	// least at 25% of the rate of the same backlog spread over
	// Config.Aggregates.
	GoalHotOneRatio = 0.25
	// GoalHotZipfRatio: one relay drains a Zipf-skewed backlog (see
	// HotZipfExponent) to the end at least at 80% of the spread rate.
	GoalHotZipfRatio = 0.80
)

// goals evaluates the goals of the phases that ran.
func goals(rep Report) []Goal {
	var gs []Goal
	add := func(name, target, measured string, value, limit float64, pass bool) {
		gs = append(gs, Goal{Name: name, Target: target, Measured: measured, Value: value, Limit: limit, Pass: pass})
	}
	if d := rep.Drain; d != nil {
		add("drain: 1 relay vs database-only ceiling",
			fmt.Sprintf(">= %.0f%%", 100*GoalDrainRatio), fmt.Sprintf("%.0f%%", 100*d.OneRelayRatio),
			d.OneRelayRatio, GoalDrainRatio, d.OneRelayRatio >= GoalDrainRatio)
	}
	if s := rep.Steady; s != nil {
		add("steady: writer throughput loss with relay",
			fmt.Sprintf("<= %.0f%%", GoalThroughputLossPercent), fmt.Sprintf("%.1f%%", s.ThroughputLossPercent),
			s.ThroughputLossPercent, GoalThroughputLossPercent, s.ThroughputLossPercent <= GoalThroughputLossPercent)
		limit := GoalBacklogTrend * s.WithRelayTxPerSecond
		add("steady: backlog does not grow (trend)",
			fmt.Sprintf("<= %s msg/s (1%% of writes)", human(limit)), fmt.Sprintf("%s msg/s", human(s.BacklogTrendPerSecond)),
			s.BacklogTrendPerSecond, limit, !s.BacklogGrows)
	}
	if l := rep.Latency; l != nil {
		// The goal is at the rate asked for: figures at a rate the writers
		// could not reach (see GoalLatencyRateShare) do not meet it.
		gs = append(gs, latencyGoals(fmt.Sprintf("latency: commit-to-ack at %d/s", l.TargetPerSecond), l)...)
	}
	if h := rep.Hot; h != nil {
		gs = append(gs, hotGoals(h)...)
	}
	if i := rep.Idle; i != nil {
		// A query repeated exactly once a second shows up W or W+1 times in
		// a window of W seconds, depending on where the window's edges fall;
		// the one at the edge is allowed for.
		limit := (GoalIdleRoundTripsPerSecond*i.WindowSeconds + 1) / i.WindowSeconds
		add("idle: round trips per second",
			fmt.Sprintf("<= %.0f/s (%.0f in %.1f s, edge included)", GoalIdleRoundTripsPerSecond, math.Floor(limit*i.WindowSeconds), i.WindowSeconds),
			fmt.Sprintf("%d in %.1f s", i.RoundTrips, i.WindowSeconds),
			i.RoundTripsPerSecond, limit, i.RoundTripsPerSecond <= limit)
	}
	if c := rep.Claim; c != nil {
		target := fmt.Sprintf("<= %.1fx empty p99", GoalClaimRatio)
		add(fmt.Sprintf("claim: p99 with %s sent rows", human(float64(c.History.HistoryRows))), target,
			fmt.Sprintf("%.2fx", c.HistoryP99Ratio), c.HistoryP99Ratio, GoalClaimRatio, c.HistoryP99Ratio <= GoalClaimRatio)
		add(fmt.Sprintf("claim: p99 right after marking %s", human(float64(c.JustMarked.HistoryRows))), target,
			fmt.Sprintf("%.2fx", c.JustMarkedP99Ratio), c.JustMarkedP99Ratio, GoalClaimRatio, c.JustMarkedP99Ratio <= GoalClaimRatio)
		add(fmt.Sprintf("claim: first claim right after marking %s", human(float64(c.JustMarked.HistoryRows))),
			fmt.Sprintf("<= %.1fx empty first", GoalClaimRatio), fmt.Sprintf("%.2fx", c.JustMarkedFirstToFirstRatio),
			c.JustMarkedFirstToFirstRatio, GoalClaimRatio, c.JustMarkedFirstToFirstRatio <= GoalClaimRatio)
	}
	if m := rep.Memory; m != nil {
		add(fmt.Sprintf("memory: peak RSS, backlog %s vs %s", human(float64(m.LargeBacklog)), human(float64(m.SmallBacklog))),
			fmt.Sprintf("<= %.2fx", GoalMemoryRatio), fmt.Sprintf("%.2fx", m.Ratio), m.Ratio, GoalMemoryRatio, m.Ratio <= GoalMemoryRatio)
	}
	return gs
}

// hotGoals are the hot phase's goals, four per strategy. The drain on one
// aggregate delivers at a steady rate (each message waits for the one
// before it, and as many wait all along), so its rate within the budget is
// that of the whole drain. The Zipf-skewed drain slows down as its quiet
// aggregates run dry, so it meets its goal only if it drained to the end.
// The latency goals are the latency phase's, on one aggregate.
func hotGoals(h *HotReport) []Goal {
	var gs []Goal
	for _, sr := range h.Strategies {
		prefix := fmt.Sprintf("hot (%s): ", sr.Strategy)
		one := sr.OneAggregate
		gs = append(gs, Goal{
			Name:   fmt.Sprintf("%sdrain on 1 aggregate vs %s", prefix, human(float64(h.Aggregates))),
			Target: fmt.Sprintf(">= %.0f%%", 100*GoalHotOneRatio), Measured: drainRatioText(one),
			Value: one.Ratio, Limit: GoalHotOneRatio, Pass: one.Ratio >= GoalHotOneRatio,
		})
		z := sr.Zipf
		gs = append(gs, Goal{
			Name:   fmt.Sprintf("%sdrain Zipf s=%g over %s vs spread", prefix, h.ZipfExponent, human(float64(h.Aggregates))),
			Target: fmt.Sprintf(">= %.0f%%, drained", 100*GoalHotZipfRatio), Measured: drainRatioText(z),
			Value: z.Ratio, Limit: GoalHotZipfRatio, Pass: z.Complete && z.Ratio >= GoalHotZipfRatio,
		})
		if l := sr.OneAggregateLatency; l != nil {
			gs = append(gs, latencyGoals(fmt.Sprintf("%scommit-to-ack at %d/s on 1 aggregate", prefix, l.TargetPerSecond), l)...)
		}
	}
	return gs
}

// hotObservations note what the hot phase's goals do not show: a
// fixed rate the writers could not reach, and messages on the hot
// aggregate the relay had not caught up with.
func hotObservations(h *HotReport) []string {
	var notes []string
	for _, sr := range h.Strategies {
		l := sr.OneAggregateLatency
		if l == nil {
			continue
		}
		if l.AchievedPerSecond < GoalLatencyRateShare*float64(l.TargetPerSecond) {
			notes = append(notes, fmt.Sprintf("hot (%s): the writers reached only %s of the %d messages/s asked for on one aggregate", sr.Strategy, human(l.AchievedPerSecond), l.TargetPerSecond))
		}
		if l.Unacked > 0 {
			notes = append(notes, fmt.Sprintf("hot (%s): %d messages on one aggregate were not acknowledged %s after the writers stopped: the relay fell behind the aggregate; its latencies are those of the messages it acknowledged", sr.Strategy, l.Unacked, hotAckWait))
		}
	}
	return notes
}

// drainRatioText is a hot drain's ratio, with what drained when the
// budget ran out first.
func drainRatioText(d HotDrain) string {
	s := fmt.Sprintf("%.0f%%", 100*d.Ratio)
	if !d.Complete {
		s += fmt.Sprintf(" (stopped after %.1f s, %s of %s drained)", d.Seconds, humanCount(d.Drained), humanCount(int64(d.Messages)))
	}
	return s
}

// latencyGoals are the p50 and p99 goals of commit-to-ack at a fixed rate:
// only at the rate asked for (see GoalLatencyRateShare) and with every
// message acknowledged.
func latencyGoals(name string, l *FixedRateReport) []Goal {
	ok := l.Unacked == 0 && l.AchievedPerSecond >= GoalLatencyRateShare*float64(l.TargetPerSecond)
	return []Goal{
		{Name: name + " p50", Target: fmt.Sprintf("<= %.0f ms", GoalLatencyP50Ms), Measured: latencyText(l, l.CommitToAck.P50Ms),
			Value: l.CommitToAck.P50Ms, Limit: GoalLatencyP50Ms, Pass: ok && l.CommitToAck.P50Ms <= GoalLatencyP50Ms},
		{Name: name + " p99", Target: fmt.Sprintf("<= %.0f ms", GoalLatencyP99Ms), Measured: latencyText(l, l.CommitToAck.P99Ms),
			Value: l.CommitToAck.P99Ms, Limit: GoalLatencyP99Ms, Pass: ok && l.CommitToAck.P99Ms <= GoalLatencyP99Ms},
	}
}

func latencyText(l *FixedRateReport, msv float64) string {
	s := fmt.Sprintf("%.2f ms", msv)
	if l.AchievedPerSecond < GoalLatencyRateShare*float64(l.TargetPerSecond) {
		s += fmt.Sprintf(" (at %s/s)", human(l.AchievedPerSecond))
	}
	if l.Unacked > 0 {
		s += fmt.Sprintf(" (%d unacked)", l.Unacked)
	}
	return s
}

// observations are notes on conditions that colour the figures: a busy
// machine, a rate the writers could not reach, messages never acknowledged.
func observations(rep Report) []string {
	var notes []string
	for _, la := range []struct{ when, v string }{{"start", rep.Machine.LoadAverageStart}, {"end", rep.Machine.LoadAverageEnd}} {
		var one float64
		if _, err := fmt.Sscan(la.v, &one); err == nil && one > float64(rep.Machine.CPUs)/2 {
			notes = append(notes, fmt.Sprintf("the machine was busy at the %s (1-minute load average %.1f on %d CPUs): rates are lower and latencies higher than on a quiet machine", la.when, one, rep.Machine.CPUs))
		}
	}
	if l := rep.Latency; l != nil && l.AchievedPerSecond < GoalLatencyRateShare*float64(l.TargetPerSecond) {
		notes = append(notes, fmt.Sprintf("latency: the writers reached only %s of the %d messages/s asked for; the latencies are at that rate", human(l.AchievedPerSecond), l.TargetPerSecond))
	}
	if s := rep.Steady; s != nil && !rep.Settings.Cursor && rep.Settings.Mode == ModePolling &&
		s.ThroughputLossPercent > GoalThroughputLossPercent && rep.RelayLeastLossPercent > 0 {
		// What an operator can do about the miss: in claim mode the relay's
		// own writes set a floor under the loss (docs/performance.md, Which
		// mode).
		notes = append(notes, fmt.Sprintf("steady: in claim mode the relay writes two row versions per message (the claim, then the mark SENT), which alone costs writers bound by the CPU %.1f%% of their throughput (the least loss); cursor mode (--cursor, outbox cursor enable) writes nothing per message", rep.RelayLeastLossPercent))
	}
	if s := rep.Steady; s != nil && s.Unacked > 0 {
		notes = append(notes, fmt.Sprintf("steady: %d messages were not acknowledged within the stall timeout after the writers stopped", s.Unacked))
	}
	if l := rep.Latency; l != nil && l.Unacked > 0 {
		notes = append(notes, fmt.Sprintf("latency: %d messages were not acknowledged within the stall timeout after the writers stopped", l.Unacked))
	}
	if h := rep.Hot; h != nil {
		notes = append(notes, hotObservations(h)...)
	}
	return notes
}

package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteText writes rep as tables for people: the machine, the figures of
// each phase that ran, and the goals with PASS or MISS.
func WriteText(w io.Writer, rep Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	m, st := rep.Machine, rep.Settings
	p := func(format string, args ...any) { fmt.Fprintf(tw, format+"\n", args...) }

	p("outbox-lab bench, %s, %.0f s", rep.StartedAt.Format("2006-01-02 15:04 MST"), rep.ElapsedSeconds)
	cpu := fmt.Sprintf("%d CPUs", m.CPUs)
	if m.CPUModel != "" {
		cpu += " (" + m.CPUModel + ")"
	}
	p("machine\t%s/%s, %s, %s, load average %s at start, %s at end", m.OS, m.Arch, cpu, m.GoVersion, orDash(m.LoadAverageStart), orDash(m.LoadAverageEnd))
	if m.CPUPressurePercent >= 0 {
		p("\tCPU pressure %.0f%% (share of the run with a runnable task waiting for a CPU)", m.CPUPressurePercent)
	}
	vac := ""
	if st.VacuumEverySeconds > 0 {
		vac = fmt.Sprintf("; the bench ran VACUUM (ANALYZE) every %s while writers ran", time.Duration(st.VacuumEverySeconds*float64(time.Second)))
	}
	p("postgresql\t%s, shared_buffers %s, synchronous_commit %s, autovacuum %s%s", m.PostgreSQL, m.SharedBuffers, m.SynchronousCommit, m.Autovacuum, vac)
	p("kafka\t%s, topic %s", m.Kafka, st.Topic)
	linger := human(st.LingerMs) + " ms"
	if st.LingerMs > 0 && st.LingerAbove > 0 {
		linger = "up to " + linger + ", growing from " + human(st.LingerAbove) + " msg/s"
	}
	store := "claim mode (claim and mark each message)"
	if st.Cursor {
		store = "cursor mode (one leader reads the new messages in seq order)"
	}
	p("relay\tbatch size %d, %d workers, poll interval %s ms, linger %s; %s", st.BatchSize, st.RelayWorkers, human(st.PollIntervalMs), linger, store)
	if st.Mode != "" && st.Mode != ModePolling {
		p("mode\t%s: the steady and latency phases run the CDC relay (package cdc, defaults); the other phases the polling relay", st.Mode)
	}
	p("")

	if d := rep.Drain; d != nil {
		p("DRAIN: a backlog of %s messages over %s aggregates, %d-byte payloads, analyzed after loading", human(float64(d.Messages)), human(float64(st.Aggregates)), st.PayloadBytes)
		p("  database-only ceiling, %d loops (claim+mark, no broker)\t%s msg/s", d.CeilingLoops, human(d.CeilingPerSecond))
		if d.CeilingCPUMicrosPerMessage > 0 {
			p("    machine CPU\t%s µs per message\tCPUs %.0f%% busy", human(d.CeilingCPUMicrosPerMessage), d.CeilingCPUBusyPercent)
		}
		p("  1 relay, end to end\t%s msg/s\t%.0f%% of the %d-loop ceiling", human(d.OneRelayPerSecond), 100*d.OneRelayRatio, d.CeilingLoops)
		p("  database-only ceiling, %d loops\t%s msg/s", d.RelaysCeilingLoops, human(d.RelaysCeilingPerSecond))
		p("  %d relays, end to end\t%s msg/s\t%.0f%% of the %d-loop ceiling", d.Relays, human(d.RelaysPerSecond), 100*d.RelaysRatio, d.RelaysCeilingLoops)
		if d.FailedPublishes > 0 {
			p("  failed publishes\t%d", d.FailedPublishes)
		}
		p("")
	}
	if s := rep.Steady; s != nil {
		p("STEADY STATE: %d writers at full speed, %d segments of %.1f s with a relay between %d without; 1 business row + 1 outbox message per tx", s.Writers, s.Segments, s.DurationSeconds/float64(max(s.Segments, 1)), s.Segments+1)
		p("  writers without relay\t%s tx/s\t%s", human(s.WithoutRelayTxPerSecond), segmentRates(s.WithoutSegmentTxPerSecond))
		if s.WritersCPUMicrosPerTx > 0 {
			p("    machine CPU\t%s µs per tx\tCPUs %.0f%% busy", human(s.WritersCPUMicrosPerTx), s.WritersCPUBusyPercent)
		}
		p("  writers with 1 relay\t%s tx/s\tloss %.1f%% (median of %s), %s", human(s.WithRelayTxPerSecond), s.ThroughputLossPercent, percents(s.SegmentLossPercent), segmentRates(s.SegmentTxPerSecond))
		if rep.RelayLeastLossPercent > 0 {
			p("  least loss\t%.1f%%\ta relay as cheap per message as the 1-relay ceiling, writers bound by the CPU", rep.RelayLeastLossPercent)
		}
		grows := "does not grow"
		if s.BacklogGrows {
			grows = "GROWS"
		}
		p("  backlog (committed - acked)\tat start %d, at end %d, max %d\ttrend %s msg/s: %s", s.BacklogStart, s.BacklogEnd, s.BacklogMax, human(s.BacklogTrendPerSecond), grows)
		p("  commit-to-ack\t%s", latencyLine(s.CommitToAck, s.Unacked))
		p("    of which\t%s", stagesLine(s.CommitToPublish, s.PublishToAck))
		p("  commit-to-marked\t%s", latencyLine(s.CommitToMarked, 0))
		p("  relay work\t%s", workLine(s.Relay))
		p("")
	}
	if l := rep.Latency; l != nil {
		p("FIXED RATE: %d msg/s for %.0f s (achieved %s/s) by %d writers, one message per tx", l.TargetPerSecond, l.DurationSeconds, human(l.AchievedPerSecond), l.Writers)
		p("  commit-to-ack\t%s", latencyLine(l.CommitToAck, l.Unacked))
		p("    of which\t%s", stagesLine(l.CommitToPublish, l.PublishToAck))
		p("  commit-to-marked\t%s", latencyLine(l.CommitToMarked, 0))
		p("  writers' transactions\t%s", txLine(l.Transactions))
		p("  relay work\t%s", workLine(l.Relay))
		p("")
	}
	if h := rep.Hot; h != nil {
		writeHot(p, h, rep)
	}
	if i := rep.Idle; i != nil {
		p("IDLE: a relay with nothing to do for %.0f s, after publishing %s messages", i.WindowSeconds, human(idleTraffic))
		p("  statements (pgx; several in one round trip when batched)\t%d\t%s/s", i.Statements, human(i.StatementsPerSecond))
		p("  round trips (socket writes, incl. pings and LISTEN)\t%d\t%s/s", i.RoundTrips, human(i.RoundTripsPerSecond))
		p("")
	}
	if c := rep.Claim; c != nil {
		p("CLAIM TIME: %d claims of %d per table (then marked, untimed)", c.Empty.Claims, c.BatchSize)
		p("  table\tfirst\tp50\tp99\tmax\tp99 / empty p99\tfirst / empty first\tload\tcheckpoint")
		row := func(name string, t ClaimTimes) {
			cp := fmt.Sprintf("%.1f s", t.CheckpointSeconds)
			if t.CheckpointError != "" {
				cp = "none"
			}
			p("  %s\t%.2f ms\t%.2f ms\t%.2f ms\t%.2f ms\t%.2fx\t%.2fx\t%.0f s\t%s", name, t.FirstMs, t.P50Ms, t.P99Ms, t.MaxMs,
				ratio(t.P99Ms, c.Empty.P99Ms), ratio(t.FirstMs, c.Empty.FirstMs), t.LoadSeconds, cp)
		}
		row(fmt.Sprintf("%s claimable rows only", human(float64(c.Empty.Claimable))), c.Empty)
		row(fmt.Sprintf("+ %s sent rows", human(float64(c.History.HistoryRows))), c.History)
		row(fmt.Sprintf("+ %s rows just marked, unvacuumed", human(float64(c.JustMarked.HistoryRows))), c.JustMarked)
		row(fmt.Sprintf("%s claimable, statistics of an empty table", human(float64(c.StaleStats.Claimable))), c.StaleStats)
		p("")
	}
	if mem := rep.Memory; mem != nil {
		p("RELAY MEMORY: %s", mem.Method)
		p("  backlog %s\tpeak %s\tdrained at %s msg/s (start-up included)", human(float64(mem.SmallBacklog)), mib(mem.SmallPeakBytes), human(mem.SmallDrainPerSecond))
		p("  backlog %s\tpeak %s\tdrained at %s msg/s (start-up included)", human(float64(mem.LargeBacklog)), mib(mem.LargePeakBytes), human(mem.LargeDrainPerSecond))
		p("")
	}
	for _, n := range rep.Notes {
		p("note: %s", n)
	}
	if len(rep.Notes) > 0 {
		p("")
	}
	if len(rep.Goals) > 0 {
		p("GOAL\tTARGET\tMEASURED\tRESULT")
		for _, g := range rep.Goals {
			res := "MISS"
			if g.Pass {
				res = "PASS"
			}
			p("%s\t%s\t%s\t%s", g.Name, g.Target, g.Measured, res)
		}
	}
	return tw.Flush()
}

// writeHot writes the hot phase's figures, each strategy's one-aggregate
// latency next to the latency phase's when that ran on the same strategy.
func writeHot(p func(string, ...any), h *HotReport, rep Report) {
	for _, sr := range h.Strategies {
		p("HOT AGGREGATES, %s mode: backlogs of %s messages, one relay; each skewed drain stops when drained or after %.1f s", sr.Strategy, human(float64(h.Messages)), sr.BudgetSeconds)
		p("  %s aggregates, round robin (reference)\t%s msg/s\t\t%s", human(float64(h.Aggregates)), human(sr.Spread.PerSecond), hotDrainLine(sr.Spread))
		p("  1 aggregate\t%s msg/s\t%.0f%%\t%s", human(sr.OneAggregate.PerSecond), 100*sr.OneAggregate.Ratio, hotDrainLine(sr.OneAggregate))
		p("  %d aggregates, round robin\t%s msg/s\t%.0f%%\t%s", h.FewAggregates, human(sr.FewAggregates.PerSecond), 100*sr.FewAggregates.Ratio, hotDrainLine(sr.FewAggregates))
		p("  Zipf s=%g over %s aggregates (busiest %.0f%%)\t%s msg/s\t%.0f%%\t%s", h.ZipfExponent, human(float64(h.Aggregates)), 100*sr.Zipf.BusiestShare,
			human(sr.Zipf.PerSecond), 100*sr.Zipf.Ratio, hotDrainLine(sr.Zipf))
		if l := sr.OneAggregateLatency; l != nil {
			p("  commit-to-ack at %d/s on 1 aggregate (achieved %s/s)\t%s", l.TargetPerSecond, human(l.AchievedPerSecond), latencyLine(l.CommitToAck, l.Unacked))
			p("    of which\t%s", stagesLine(l.CommitToPublish, l.PublishToAck))
			p("  relay work\t%s", workLine(l.Relay))
		}
		if sp := rep.Latency; sp != nil && rep.Settings.Mode == ModePolling && rep.Settings.Cursor == (sr.Strategy == StrategyCursor) {
			p("  commit-to-ack at %d/s, spread (latency phase)\t%s", sp.TargetPerSecond, latencyLine(sp.CommitToAck, sp.Unacked))
		}
		p("")
	}
}

// hotDrainLine says how much of a hot drain's backlog drained in how long.
func hotDrainLine(d HotDrain) string {
	s := fmt.Sprintf("%s messages in %.1f s", humanCount(d.Drained), d.Seconds)
	if !d.Complete {
		s += fmt.Sprintf(", STOPPED with %s left", humanCount(int64(d.Messages)-d.Drained))
	}
	if d.FailedPublishes > 0 {
		s += fmt.Sprintf(", %d failed publishes", d.FailedPublishes)
	}
	return s
}

func latencyLine(l Latency, unacked int) string {
	s := fmt.Sprintf("p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms over %s messages",
		l.P50Ms, l.P90Ms, l.P99Ms, l.P999Ms, l.MaxMs, human(float64(l.Count)))
	if unacked > 0 {
		s += fmt.Sprintf(", %d NOT acknowledged", unacked)
	}
	return s
}

// txLine is the writers' own transaction times, BEGIN to COMMIT returned.
func txLine(l Latency) string {
	return fmt.Sprintf("p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, max %.2f ms, BEGIN to COMMIT returned",
		l.P50Ms, l.P90Ms, l.P99Ms, l.P999Ms, l.MaxMs)
}

func stagesLine(toPublish, toAck Latency) string {
	return fmt.Sprintf("commit to publish p50 %.2f ms, p99 %.2f ms; publish to ack p50 %.2f ms, p99 %.2f ms",
		toPublish.P50Ms, toPublish.P99Ms, toAck.P50Ms, toAck.P99Ms)
}

func workLine(w RelayWork) string {
	if w.Claims == 0 { // a CDC relay does not claim
		return fmt.Sprintf("%s round trips to PostgreSQL per message (besides the replication stream)", human(w.RoundTripsPerMessage))
	}
	return fmt.Sprintf("%s claims of %s messages on average; %s round trips to PostgreSQL per message",
		human(float64(w.Claims)), human(w.MessagesPerClaim), human(w.RoundTripsPerMessage))
}

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}

// segmentRates lists the steady phase's segment rates, in order: how much
// the machine drifted during the phase.
func segmentRates(xs []float64) string {
	if len(xs) == 0 {
		return ""
	}
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = human(x)
	}
	return "segments " + strings.Join(parts, ", ")
}

// percents lists values as "31%, 28%, ...".
func percents(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.0f%%", x)
	}
	return strings.Join(parts, ", ")
}

package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// Invariants lists every invariant in the order the table prints them.
var Invariants = []string{InvNoLost, InvNoPhantom, InvOrder, InvDuplicates, InvEffects, InvDeadLetters, InvDrain, InvResourcesFlat, InvNoUnknownFail}

// MarshalJSON writes the latency in milliseconds.
func (l Latency) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]any{"n": l.N, "p50Ms": ms(l.P50), "p99Ms": ms(l.P99), "maxMs": ms(l.Max)})
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// JSON returns the report as indented JSON (see [Report.MarshalJSON]).
func (r Report) JSON() ([]byte, error) {
	return json.MarshalIndent(r, "", "  ")
}

// MarshalJSON writes the seed, the duration, the faults by kind, the
// requests, events, duplicates, effects, dead letters, latencies, the drain
// time and the verdict, with durations in milliseconds.
func (r Report) MarshalJSON() ([]byte, error) {
	type out struct {
		Seed            int64               `json:"seed"`
		Strategy        string              `json:"strategy"`
		DurationMs      int64               `json:"durationMs"`
		ElapsedMs       int64               `json:"elapsedMs"`
		Result          string              `json:"result"`
		Violated        []string            `json:"violated"`
		Violations      map[string][]string `json:"violations"`
		Faults          map[string]int      `json:"faults"`
		FaultsTotal     int                 `json:"faultsTotal"`
		Requests        RequestCounts       `json:"requests"`
		Events          EventCounts         `json:"events"`
		Duplicates      DupCounts           `json:"duplicates"`
		Effects         EffectCounts        `json:"effects"`
		DeadLetters     DeadLetterCounts    `json:"deadLetters"`
		LatencyCalm     Latency             `json:"latencyCalm"`
		LatencyFaults   Latency             `json:"latencyFaults"`
		DrainMs         int64               `json:"drainMs"`
		SampleEveryMs   int64               `json:"sampleEveryMs"`
		Resources       []ResourceSeries    `json:"resources"`
		PauseStalls     []PauseStall        `json:"pauseStalls"`
		LongestStallMs  int64               `json:"longestStallMs"`
		Skipped         []string            `json:"skipped,omitempty"`
		UnexpectedExits []string            `json:"unexpectedExits,omitempty"`
		Schedule        []PlannedFault      `json:"schedule"`
		WorkDir         string              `json:"workDir,omitempty"`
	}
	o := out{Seed: r.Seed, Strategy: r.Strategy, DurationMs: r.Duration.Milliseconds(), ElapsedMs: r.Elapsed.Milliseconds(), Result: r.Result(),
		Violated: r.Violated(), Violations: r.Violations, Faults: r.Faults, FaultsTotal: r.FaultsTotal(),
		Requests: r.Requests, Events: r.Events, Duplicates: r.Duplicates, Effects: r.Effects, DeadLetters: r.DeadLetters,
		LatencyCalm: r.LatencyCalm, LatencyFaults: r.LatencyFaults, DrainMs: r.Drain.Milliseconds(),
		SampleEveryMs: r.SampleEvery.Milliseconds(), Resources: r.Resources, PauseStalls: r.Stalls, LongestStallMs: r.LongestStall().Milliseconds(),
		Skipped: r.Skipped, UnexpectedExits: r.UnexpectedExits, Schedule: r.Schedule, WorkDir: r.WorkDir}
	if o.Violations == nil {
		o.Violations = map[string][]string{}
	}
	if o.Violated == nil {
		o.Violated = []string{}
	}
	if o.Resources == nil {
		o.Resources = []ResourceSeries{}
	}
	if o.PauseStalls == nil {
		o.PauseStalls = []PauseStall{}
	}
	return json.Marshal(o)
}

// Result is "PASS" or "FAIL".
func (v Verdict) Result() string {
	if v.Pass {
		return "PASS"
	}
	return "FAIL"
}

// Violated names the violated invariants, in table order.
func (v Verdict) Violated() []string {
	var out []string
	for _, inv := range Invariants {
		if len(v.Violations[inv]) > 0 {
			out = append(out, inv)
		}
	}
	return out
}

// FaultsTotal is the number of faults injected.
func (r Report) FaultsTotal() int {
	n := 0
	for _, c := range r.Faults {
		n += c
	}
	return n
}

// WriteTable prints the report for people.
func (r Report) WriteTable(w io.Writer) {
	lat := func(l Latency) string {
		if l.N == 0 {
			return "n=0"
		}
		return fmt.Sprintf("p50 %s  p99 %s  max %s  (n=%d)", l.P50.Round(100*time.Microsecond), l.P99.Round(100*time.Microsecond), l.Max.Round(time.Millisecond), l.N)
	}
	var faults []string
	for _, k := range slices.Sorted(maps.Keys(r.Faults)) {
		faults = append(faults, fmt.Sprintf("%s %d", k, r.Faults[k]))
	}
	rows := [][2]string{
		{"seed", fmt.Sprint(r.Seed)},
		{"strategy", r.Strategy},
		{"duration", fmt.Sprintf("%s of load and faults, %s in all", r.Duration, r.Elapsed.Round(time.Second))},
		{"faults", fmt.Sprintf("%d: %s", r.FaultsTotal(), strings.Join(faults, ", "))},
		{"requests", fmt.Sprintf("ok %d  rejected %d  indeterminate %d", r.Requests.OK, r.Requests.Rejected, r.Requests.Indeterminate)},
		{"events", fmt.Sprintf("committed %d  delivered %d  lost %d  phantom %d  out of order %d  stale redeliveries %d",
			r.Events.Committed, r.Events.Delivered, r.Events.Lost, r.Events.Phantom, r.Events.OutOfOrder, r.Events.StaleRedeliveries)},
		{"duplicates", fmt.Sprintf("total %d  max copies %d  outside fault windows %d", r.Duplicates.Total, r.Duplicates.MaxCopies, r.Duplicates.OutsideFaults)},
		{"effects", fmt.Sprintf("once %d  missing %d  twice %d  wrong state %d  stock errors %d",
			r.Effects.Once, r.Effects.Missing, r.Effects.Twice, r.Effects.WrongState, r.Effects.StockErrors)},
		{"dead letters", fmt.Sprintf("expected %d  actual %d", r.DeadLetters.Expected, r.DeadLetters.Actual)},
		{"latency calm", lat(r.LatencyCalm)},
		{"latency faults", lat(r.LatencyFaults)},
		{"drain", r.Drain.Round(time.Millisecond).String()},
		{"pause stalls", r.stallSummary()},
	}
	if len(r.Skipped) > 0 {
		rows = append(rows, [2]string{"not injected", strings.Join(r.Skipped, "; ")})
	}
	if len(r.UnexpectedExits) > 0 {
		rows = append(rows, [2]string{"unexpected exits", strings.Join(r.UnexpectedExits, "; ")})
	}
	for _, row := range rows {
		fmt.Fprintf(w, "%-16s %s\n", row[0], row[1])
	}
	fmt.Fprintln(w)
	r.writeResources(w)
	for _, inv := range Invariants {
		if ex := r.Violations[inv]; len(ex) > 0 {
			fmt.Fprintf(w, "%-26s FAIL (%d)\n", inv, r.ViolationCount(inv))
			for _, e := range ex[:min(5, len(ex))] {
				fmt.Fprintf(w, "    %s\n", e)
			}
		} else {
			fmt.Fprintf(w, "%-26s PASS\n", inv)
		}
	}
	fmt.Fprintln(w)
	if r.Pass {
		fmt.Fprintln(w, "RESULT PASS")
	} else {
		fmt.Fprintf(w, "RESULT FAIL: %s\n", strings.Join(r.Violated(), ", "))
	}
}

// stallSummary is the pause stalls on one line: the longest, and each.
func (r Report) stallSummary() string {
	if len(r.Stalls) == 0 {
		return "no relay paused"
	}
	var each []string
	for _, s := range r.Stalls {
		stall := "no record after it"
		if s.Stall >= 0 {
			stall = s.Stall.Round(time.Millisecond).String()
		}
		each = append(each, fmt.Sprintf("%s at %s for %s: %s", s.Relay, s.At.Round(time.Second), s.Pause.Round(100*time.Millisecond), stall))
	}
	return fmt.Sprintf("longest %s; %s", r.LongestStall().Round(time.Millisecond), strings.Join(each, "; "))
}

// writeResources prints the relays' samples as a table, if any.
func (r Report) writeResources(w io.Writer) {
	if len(r.Resources) == 0 {
		return
	}
	fmt.Fprintf(w, "relay resources (every %s, at the load's end and after the drain; flat: last <= %.1f x median of the first half + slack)\n",
		r.SampleEvery, FlatFactor)
	fmt.Fprintf(w, "  %-9s %13s %8s %12s %11s %9s\n", "relay", "at", "pid", "rss", "goroutines", "db conns")
	for _, s := range r.Resources {
		for i, x := range s.Samples {
			name := s.Relay
			if i > 0 {
				name = ""
			}
			pid := "-"
			if x.PID > 0 {
				pid = fmt.Sprint(x.PID)
			}
			at := x.At.Round(time.Second).String()
			if x.Phase != SampleLoad {
				at += " " + x.Phase
			}
			fmt.Fprintf(w, "  %-9s %13s %8s %12s %11s %9s\n", name, at, pid, mib(x.RSS),
				count(int64(x.Goroutines)), count(int64(x.Conns)))
		}
	}
	fmt.Fprintln(w)
}

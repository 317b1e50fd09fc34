package bench

import (
	"slices"
	"strings"
	"testing"
)

// A claim-mode run that misses the writers' loss says what sets its floor
// and what to run instead; a run that meets it, a cursor-mode run and a CDC
// run do not.
func TestObservations_ClaimModeLossNamesItsFloorAndCursorMode(t *testing.T) {
	hint := func(n string) bool { return strings.Contains(n, "cursor mode (--cursor") }
	for _, tc := range []struct {
		name   string
		loss   float64
		cursor bool
		mode   Mode
		want   bool
	}{
		{"claim mode misses", 12.5, false, ModePolling, true},
		{"claim mode meets", 9.5, false, ModePolling, false},
		{"cursor mode misses", 12.5, true, ModePolling, false},
		{"cdc misses", 12.5, false, ModeCDC, false},
	} {
		rep := Report{
			Settings:              Settings{Mode: tc.mode, Cursor: tc.cursor},
			Steady:                &SteadyReport{ThroughputLossPercent: tc.loss},
			RelayLeastLossPercent: 9.3,
		}
		notes := observations(rep)
		if got := slices.ContainsFunc(notes, hint); got != tc.want {
			t.Errorf("%s: hint %v, want %v: %q", tc.name, got, tc.want, notes)
		}
		if tc.want && !slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, "9.3% of their throughput") }) {
			t.Errorf("%s: the least loss is not named: %q", tc.name, notes)
		}
	}
}

// The latency goals are at the rate asked for: a relay measured at a lower
// rate, because the writers could not keep to the schedule, does not meet
// them however fast it was.
func TestGoals_LatencyCountsOnlyAtTheRateAskedFor(t *testing.T) {
	fast := Latency{Count: 10_000, P50Ms: 1, P99Ms: 5}
	for _, tc := range []struct {
		name     string
		achieved float64
		unacked  int
		pass     bool
		measured string
	}{
		{"rate reached", 999, 0, true, "5.00 ms"},
		{"at the share", 950, 0, true, "5.00 ms"},
		{"rate not reached", 940, 0, false, "5.00 ms (at 940/s)"},
		{"unacknowledged", 1000, 3, false, "5.00 ms (3 unacked)"},
	} {
		rep := Report{Latency: &FixedRateReport{TargetPerSecond: 1000, AchievedPerSecond: tc.achieved, Delivery: Delivery{CommitToAck: fast, Unacked: tc.unacked}}}
		gs := goals(rep)
		if len(gs) != 2 {
			t.Fatalf("%s: %d goals, want p50 and p99: %+v", tc.name, len(gs), gs)
		}
		for _, g := range gs {
			if g.Pass != tc.pass {
				t.Errorf("%s: %s pass = %v, want %v", tc.name, g.Name, g.Pass, tc.pass)
			}
		}
		if p99 := gs[1]; !strings.HasSuffix(p99.Name, "p99") || p99.Measured != tc.measured {
			t.Errorf("%s: %s measured %q, want %q", tc.name, p99.Name, p99.Measured, tc.measured)
		}
	}
	slow := Report{Latency: &FixedRateReport{TargetPerSecond: 1000, AchievedPerSecond: 1000, Delivery: Delivery{CommitToAck: Latency{Count: 10_000, P50Ms: 3.5, P99Ms: 15.5}}}}
	for _, g := range goals(slow) {
		if g.Pass {
			t.Errorf("%s passed with p50 3.5 ms and p99 15.5 ms", g.Name)
		}
	}
}

func TestLatencyWriters_KeepToTheRateWithoutPilingUp(t *testing.T) {
	for _, tc := range []struct{ writers, rate, want int }{
		{8, 1000, 8},     // the default: the steady phase's writers
		{8, 100, 8},      // never fewer than the steady phase's
		{2, 1000, 8},     // enough for commits of 8 ms on average
		{8, 2000, 16},    // more for a higher rate
		{8, 100_000, 24}, // capped, to stay within max_connections
		{32, 1000, 32},
	} {
		if got := latencyWriters(tc.writers, tc.rate); got != tc.want {
			t.Errorf("latencyWriters(%d, %d) = %d, want %d", tc.writers, tc.rate, got, tc.want)
		}
	}
}

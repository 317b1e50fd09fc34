package chaos

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// ResourceSample is one sample of a relay process: taken when the load
// starts, every Config.SampleEvery while it runs, when it ends and after
// the drain. A figure that could not be read is -1 (the process was down,
// paused, or restarting).
type ResourceSample struct {
	// At is the time since the load's start.
	At time.Duration
	// Phase is SampleLoad, SampleEnd or SampleDrained.
	Phase string
	// PID is the process sampled; 0 when none ran.
	PID int
	// RSS is its resident memory in bytes (VmRSS of /proc/<pid>/status).
	RSS int64
	// Goroutines is go_goroutines of its admin endpoint's /metrics.
	Goroutines int
	// Conns counts its connections to PostgreSQL in pg_stat_activity (by
	// the application_name every connection of the relay carries): its
	// pools, the admin endpoint's pool and, in CDC mode, its replication
	// connection.
	Conns int
}

// Phases of a ResourceSample.
const (
	SampleLoad    = "load"    // at the load's start, and every Config.SampleEvery while it runs
	SampleEnd     = "end"     // when the load ended
	SampleDrained = "drained" // after the drain
)

// MarshalJSON writes At in milliseconds.
func (s ResourceSample) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]any{"atMs": s.At.Milliseconds(), "phase": s.Phase, "pid": s.PID, "rssBytes": s.RSS,
		"goroutines": s.Goroutines, "connections": s.Conns})
}

// ResourceSeries are the samples of one relay (relay-1, ...), in time
// order. A relay killed and restarted by a fault is sampled in its new
// process (a new PID) from then on.
type ResourceSeries struct {
	Relay   string           `json:"relay"`
	Samples []ResourceSample `json:"samples"`
}

// The flat rule of [InvResourcesFlat]: for each relay and each figure
// (resident memory, goroutines, connections), the last sample, taken after
// the drain, is at most FlatFactor times the median of the samples in the
// first half of the series (the earlier half; for an odd count, without the
// middle one) plus the figure's slack. The slack covers the warm-up from
// an idle process at the load's start to one under load: a connection
// pool that fills, the producer's buffers, the goroutines of in-flight
// work. A figure with fewer than two samples is not judged.
const (
	FlatFactor          = 1.5
	FlatSlackRSS        = 64 << 20
	FlatSlackGoroutines = 100
	FlatSlackConns      = 10
)

// resourceFigures are the figures the flat rule judges.
var resourceFigures = []struct {
	name  string
	of    func(ResourceSample) int64
	slack int64
	show  func(int64) string
}{
	{"resident memory", func(s ResourceSample) int64 { return s.RSS }, FlatSlackRSS, mib},
	{"goroutines", func(s ResourceSample) int64 { return int64(s.Goroutines) }, FlatSlackGoroutines, count},
	{"database connections", func(s ResourceSample) int64 { return int64(s.Conns) }, FlatSlackConns, count},
}

func mib(b int64) string {
	if b < 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

func count(n int64) string {
	if n < 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

// checkResources applies the flat rule to every relay's series.
func checkResources(series []ResourceSeries, violate func(inv, format string, args ...any)) {
	for _, s := range series {
		for _, f := range resourceFigures {
			var known []int64
			var last ResourceSample
			for _, x := range s.Samples {
				if v := f.of(x); v >= 0 {
					known = append(known, v)
					last = x
				}
			}
			if ok, base, limit := flat(known, f.slack); !ok {
				violate(InvResourcesFlat, "%s: %s grew to %s (pid %d, at %s), over %.1f x %s (the median of the first half) + %s = %s",
					s.Relay, f.name, f.show(known[len(known)-1]), last.PID, last.At.Round(time.Second), FlatFactor,
					f.show(base), f.show(f.slack), f.show(limit))
			}
		}
	}
}

// flat applies the flat rule to values, in time order: it returns whether
// they are flat, the median of the first half and the limit of the last.
func flat(values []int64, slack int64) (ok bool, base, limit int64) {
	if len(values) < 2 {
		return true, 0, 0
	}
	first := slices.Clone(values[:len(values)/2])
	slices.Sort(first)
	n := len(first)
	base = first[n/2]
	if n%2 == 0 {
		base = (first[n/2-1] + first[n/2]) / 2
	}
	limit = int64(FlatFactor*float64(base)) + slack
	return values[len(values)-1] <= limit, base, limit
}

// PauseStall is what a relay-zombie fault (a SIGSTOP of the leader, where
// there is one) did to publishing: the time from the pause to the next
// record the broker stored from any relay.
type PauseStall struct {
	// Relay is the relay paused; At is when, since the load's start.
	Relay string
	At    time.Duration
	// Pause is how long it was stopped.
	Pause time.Duration
	// Stall is the time from the pause to the first record produced after
	// it; -1 when no record was.
	Stall time.Duration
}

// MarshalJSON writes the durations in milliseconds.
func (p PauseStall) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]any{"relay": p.Relay, "atMs": p.At.Milliseconds(), "pauseMs": p.Pause.Milliseconds(),
		"stallMs": p.Stall.Milliseconds()})
}

// pauseStalls measures the stall after every relay-zombie fault: from its
// start to the earliest record timestamp (the producer's, set when the
// relay handed the record over) after it, on any topic.
func pauseStalls(obs Observations) []PauseStall {
	ts := make([]time.Time, len(obs.Records))
	for i, r := range obs.Records {
		ts[i] = r.Timestamp
	}
	slices.SortFunc(ts, time.Time.Compare)
	var out []PauseStall
	for _, f := range obs.Faults {
		if f.Kind != FaultRelayZombie {
			continue
		}
		p := PauseStall{Relay: f.Target, At: f.Start.Sub(obs.Started), Pause: f.End.Sub(f.Start), Stall: -1}
		if i, _ := slices.BinarySearchFunc(ts, f.Start, time.Time.Compare); i < len(ts) {
			p.Stall = ts[i].Sub(f.Start)
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b PauseStall) int { return cmp.Compare(a.At, b.At) })
	return out
}

// LongestStall is the longest of the stalls, 0 without any.
func (v Verdict) LongestStall() time.Duration {
	var m time.Duration
	for _, s := range v.Stalls {
		m = max(m, s.Stall)
	}
	return m
}

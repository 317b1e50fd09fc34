package bench

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
)

// quantile returns the q-quantile (0 < q <= 1) of sorted by the nearest-rank
// method: the smallest value with at least q of the values at or below it.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// latencyOf summarises ds (which it sorts).
func latencyOf(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	slices.Sort(ds)
	return Latency{Count: len(ds), P50Ms: ms(quantile(ds, 0.50)), P90Ms: ms(quantile(ds, 0.90)), P99Ms: ms(quantile(ds, 0.99)),
		P999Ms: ms(quantile(ds, 0.999)), MaxMs: ms(ds[len(ds)-1])}
}

// sample is one observation of a series over time.
type sample struct {
	at    time.Duration
	value float64
}

// slope is the Theil-Sen slope of the samples, in value per second: the
// median of the slopes between every two samples; 0 with fewer than two.
// A backlog that grows rises between most pairs of samples, so the median
// sees it, while a momentary peak (a relay that lingers, or one stall of a
// hundred milliseconds) changes only the pairs that include it: a
// least-squares line through 9 samples of a 2.5 s segment was pulled to a
// "growing" 25-32 messages/s by one peak at a segment's end.
func slope(ss []sample) float64 {
	var slopes []float64
	for i := range ss {
		for j := i + 1; j < len(ss); j++ {
			if dt := (ss[j].at - ss[i].at).Seconds(); dt > 0 {
				slopes = append(slopes, (ss[j].value-ss[i].value)/dt)
			}
		}
	}
	return median(slopes)
}

// ratio is a/b, or 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// human formats a rate or count with thousands separators and no decimals
// ("12,345"), or with up to two significant decimals below 100.
func human(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Sprint(v)
	}
	if math.Abs(v) < 100 {
		return strconv.FormatFloat(v, 'f', decimals(v), 64)
	}
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// humanCount formats a count as human does, without decimals ("26",
// "12,345").
func humanCount(n int64) string {
	if n > -100 && n < 100 {
		return strconv.FormatInt(n, 10)
	}
	return human(float64(n))
}

func decimals(v float64) int {
	switch a := math.Abs(v); {
	case a == 0 || a >= 10:
		return 1
	case a >= 1:
		return 2
	default:
		return 3
	}
}

// mib formats bytes as MiB.
func mib(b int64) string { return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64) + " MiB" }

package relay

import (
	"testing"
	"time"
)

// The rate is over the last rateWindow; a busy spell younger than that is
// measured from its first claim (over at least rateMinSpan), so that a
// relay whose writers start at full speed lingers at once; a window without
// claims resets it to zero, so an idle relay is not taken for a busy one.
func TestRateMeter_SlidingWindowFromTheStartOfABusySpell(t *testing.T) {
	var m rateMeter
	t0 := time.Unix(1000, 0)
	near := func(at time.Duration, want float64) {
		t.Helper()
		if got := m.perSecond(t0.Add(at)); got < want-1e-6 || got > want+1e-6 {
			t.Fatalf("rate at %v = %v, want %v", at, got, want)
		}
	}
	near(0, 0)
	m.add(t0, 0) // empty claims are not a busy spell
	near(time.Millisecond, 0)
	m.add(t0, 60)
	m.add(t0.Add(30*time.Millisecond), 60)
	near(30*time.Millisecond, 120/0.05) // over rateMinSpan, not 30 ms
	m.add(t0.Add(100*time.Millisecond), 80)
	near(100*time.Millisecond, 200/0.1) // from the spell's start
	for at := 110 * time.Millisecond; at <= 500*time.Millisecond; at += 10 * time.Millisecond {
		m.add(t0.Add(at), 10) // 1,000 per second
	}
	// Over the last window only: 25 buckets of 10 at 1,000 per second.
	near(500*time.Millisecond, 250/0.25)
	// Nothing for a window: zero, and the next spell is not diluted by the
	// idle time before it.
	near(760*time.Millisecond, 0)
	m.add(t0.Add(2*time.Second), 100)
	m.add(t0.Add(2*time.Second+40*time.Millisecond), 100)
	near(2*time.Second+50*time.Millisecond, 200/0.05)
}

// The linger grows with the claim rate: none up to LingerAbove, then in
// proportion, Linger from twice LingerAbove on; Linger at any rate with a
// negative LingerAbove, and never with a negative Linger.
func TestLingerAt_GrowsWithTheRate(t *testing.T) {
	def := Config{}.WithDefaults()
	for _, c := range []struct {
		cfg  Config
		rate float64
		want time.Duration
	}{
		{def, 0, 0},
		{def, 1000, 0},
		{def, 1200, 0},
		{def, 1500, 5 * time.Millisecond},
		{def, 1800, 10 * time.Millisecond},
		{def, 2400, 20 * time.Millisecond},
		{def, 50000, 20 * time.Millisecond},
		{Config{Linger: 8 * time.Millisecond, LingerAbove: -1}, 0, 8 * time.Millisecond},
		{Config{Linger: -1, LingerAbove: 1200}, 5000, 0},
	} {
		if got := c.cfg.lingerAt(c.rate); got != c.want {
			t.Errorf("Linger %v, LingerAbove %v, rate %v: lingerAt = %v, want %v", c.cfg.Linger, c.cfg.LingerAbove, c.rate, got, c.want)
		}
	}
}

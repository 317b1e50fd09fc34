package relay

import (
	"testing"
	"time"
)

// The rate is that of the last complete window; a window with no claims
// after it resets it to zero, so an idle relay is not taken for a busy one.
func TestRateMeter_RateOfLastWindow(t *testing.T) {
	var m rateMeter
	t0 := time.Unix(1000, 0)
	if got := m.perSecond(t0); got != 0 {
		t.Fatalf("rate before any claim = %v, want 0", got)
	}
	m.add(t0, 100)
	m.add(t0.Add(100*time.Millisecond), 400)
	if got := m.perSecond(t0.Add(200 * time.Millisecond)); got != 0 {
		t.Fatalf("rate within the first window = %v, want 0 (not complete yet)", got)
	}
	// The window closes at the first call after 250ms: 500 messages in 300ms.
	if got, want := m.perSecond(t0.Add(300*time.Millisecond)), 500/0.3; got < want-1e-9 || got > want+1e-9 {
		t.Fatalf("rate = %v, want %v", got, want)
	}
	m.add(t0.Add(400*time.Millisecond), 50)
	if got, want := m.perSecond(t0.Add(400*time.Millisecond)), 500/0.3; got < want-1e-9 || got > want+1e-9 {
		t.Fatalf("rate while the next window fills = %v, want the last window's %v", got, want)
	}
	// Nothing for two windows: the rate drops to zero.
	if got := m.perSecond(t0.Add(2 * time.Second)); got != 0 {
		t.Fatalf("rate after an idle second = %v, want 0", got)
	}
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

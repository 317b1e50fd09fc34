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

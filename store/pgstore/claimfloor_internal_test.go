package pgstore

import (
	"testing"
	"time"
)

// A claim that began before the probe below the floor ended must not raise
// the floor past what the probe found: the probe saw a due message below
// the floor the claim started from, and the claim did not look there. (In
// cursor mode the table path claimed once a second, always beside the
// probe its claim had started, so the floor went back up every time and a
// message waited behind it for minutes.)
func TestClaimFloor_AClaimOlderThanTheProbeDoesNotRaiseTheFloorPastIt(t *testing.T) {
	f := &claimFloor{seq: 100, bound: 200, cand: 300, candAt: time.Now(), seeded: true}
	interval := time.Second
	claim := f.begin(interval) // from 100
	if claim.from != 100 {
		t.Fatalf("claim scans from %d, want 100", claim.from)
	}
	low := int64(50)
	f.end(claimScan{full: true, at: time.Now(), interval: interval, low: &low}) // the probe found 50
	if f.seq != 50 {
		t.Fatalf("floor after the probe = %d, want 50", f.seq)
	}
	top := int64(400)
	claim.top = &top // found nothing due above 100
	f.end(claim)
	if f.seq != 50 {
		t.Errorf("floor after the older claim ended = %d, want it to stay at the probe's 50", f.seq)
	}
	// A claim that begins after the probe may raise it again as usual.
	next := f.begin(interval)
	next.top = &top
	f.end(next)
	if f.seq != 200 {
		t.Errorf("floor after a newer claim found nothing = %d, want the bound 200", f.seq)
	}
}

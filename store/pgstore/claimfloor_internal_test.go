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

// Once the Store's claims have found nothing for an interval, the claim that
// is due to look below the floor does so itself (a full claim, one round
// trip) instead of starting the probe on a second connection. A claim that
// finds messages, and a new Store's first claims, keep the probe, so that
// claims under load never scan from seq 0.
func TestClaimFloor_AnIdleStoreLooksBelowTheFloorInItsOwnClaim(t *testing.T) {
	const interval = time.Second
	f := &claimFloor{seq: 100, bound: 200, seeded: true}
	t0 := time.Now().Add(-time.Hour)

	// A new Store: no claim yet, so the first look below the floor is the
	// probe.
	first := f.begin(interval)
	if first.full || !first.probe || first.from != 100 {
		t.Fatalf("first claim: %+v; want a claim from the floor that starts the probe", first)
	}
	f.end(claimScan{full: true, at: first.at, interval: interval}) // the probe's end
	f.probing = false
	if !f.emptySince.IsZero() {
		t.Fatal("the probe's end counted as a claim that found nothing")
	}

	// Claims that find nothing, from t0 on.
	f.end(claimScan{from: 100, at: t0, interval: interval, counted: true})
	f.lastFull = time.Time{}
	idle := f.begin(interval)
	if !idle.full || idle.probe || idle.from != 0 {
		t.Fatalf("claim after an hour of finding nothing: %+v; want a full claim from seq 0 and no probe", idle)
	}
	if again := f.begin(interval); again.full || again.probe || again.from == 0 {
		t.Fatalf("claim right after the full one: %+v; want a claim from the floor", again)
	}

	// A claim that found messages: the store is busy again.
	f.end(claimScan{from: 100, at: time.Now(), interval: interval, counted: true, claimed: 3})
	f.lastFull = time.Time{}
	busy := f.begin(interval)
	if busy.full || !busy.probe {
		t.Fatalf("claim after one that found messages: %+v; want the probe beside it", busy)
	}
}

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

// A probe below the floor reads the table as it was when the probe began;
// after two million rows were marked it walks their dead index entries for
// seconds, while the claims beside it move the floor on. If it found nothing
// due below the floor it began at, it must not drop the floor back to its
// old low: the next claim would walk everything marked meanwhile. If it did
// find something below, the floor goes there.
func TestClaimFloor_AProbeThatFoundNothingBelowItsFloorDoesNotDropIt(t *testing.T) {
	const interval = time.Second
	f := &claimFloor{seq: 100, bound: 10_000, cand: 20_000, candAt: time.Now(), seeded: true}
	first := f.begin(interval)
	if !first.probe || first.from != 100 {
		t.Fatalf("first claim: %+v; want a claim from 100 that starts the probe", first)
	}
	probe := claimScan{full: true, below: first.from, at: first.at, interval: interval}

	// Claims beside the probe move the floor to 3,000.
	for _, low := range []int64{100, 1_000, 3_000} {
		c := f.begin(interval)
		c.low = &low
		f.end(c)
	}
	if f.seq != 3_000 {
		t.Fatalf("floor after the claims = %d, want 3000", f.seq)
	}

	stale := int64(100) // the lowest due message when the probe began
	probe.low = &stale
	f.end(probe)
	if f.seq != 3_000 {
		t.Errorf("floor after a probe that found nothing below 100 = %d, want it to stay at 3000", f.seq)
	}

	// The next probe finds a message below the floor it began at.
	f.probing, f.lastFull = false, time.Time{}
	second := f.begin(interval)
	if !second.probe {
		t.Fatalf("claim: %+v; want the probe beside it", second)
	}
	found := int64(42)
	f.end(claimScan{full: true, below: second.from, at: second.at, interval: interval, low: &found})
	if f.seq != 42 {
		t.Errorf("floor after a probe that found 42 below 3000 = %d, want 42", f.seq)
	}
}

// A new Store seeds its floor from the message marked SENT last, and does
// not know the bound for a FullClaimInterval. Its claims move the floor on
// meanwhile: one that stayed at the seed would have every claim walk the
// index entries that the claims before it marked, which while a long probe
// holds back their removal (after a mass mark) costs a visit to the table
// each.
func TestClaimFloor_ASeededFloorMovesWithTheClaims(t *testing.T) {
	const interval = time.Second
	f := &claimFloor{seq: 100, seeded: true}
	c := f.begin(interval)
	top := int64(5_000)
	low := int64(200)
	c.low, c.top = &low, &top
	f.end(c)
	if f.bound != 0 {
		t.Fatalf("bound = %d after one claim; want it still unknown", f.bound)
	}
	if f.seq != 200 {
		t.Fatalf("seeded floor after a claim whose lowest due message was 200 = %d, want 200", f.seq)
	}

	// An unseeded floor stays at 0 until the bound is known.
	u := &claimFloor{seeded: true}
	uc := u.begin(interval)
	uc.low, uc.top = &low, &top
	u.end(uc)
	if u.seq != 0 {
		t.Errorf("unseeded floor after a claim = %d, want 0 until the bound is known", u.seq)
	}
}

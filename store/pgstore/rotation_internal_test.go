package pgstore

import "testing"

func TestClaimRotation_AStaleClaimDoesNotMoveTheStartBack(t *testing.T) {
	k := func(id string) aggregateKey { return aggregateKey{"Order", id} }
	var r claimRotation
	r.advance(aggregateKey{}, k("m"))
	if got := r.get(); got != k("m") {
		t.Fatalf("start %v, want m", got)
	}
	// Two claims began at m; the first moved the start to q.
	r.advance(k("m"), k("q"))
	r.advance(k("m"), k("n"))
	if got := r.get(); got != k("q") {
		t.Errorf("start %v after a stale claim, want it kept at q", got)
	}
}

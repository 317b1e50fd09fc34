package statuscount_test

import (
	"testing"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/statuscount"
)

// Zero holds the five statuses of the table path at 0, and a fresh map
// each time, so that a store's counts never leak into another's.
func TestZero_EveryTablePathStatusAtZero(t *testing.T) {
	t.Parallel()
	want := []outbox.Status{outbox.StatusPending, outbox.StatusInFlight, outbox.StatusSent,
		outbox.StatusFailed, outbox.StatusDeadLetter}
	got := statuscount.Zero()
	if len(got) != len(want) {
		t.Fatalf("Zero() = %v, want exactly %v", got, want)
	}
	for _, st := range want {
		if n, ok := got[st]; !ok || n != 0 {
			t.Errorf("Zero()[%s] = %d (present: %v), want 0", st, n, ok)
		}
	}
	got[outbox.StatusSent] = 7
	if n := statuscount.Zero()[outbox.StatusSent]; n != 0 {
		t.Fatalf("a second Zero() has SENT = %d after the first was changed", n)
	}
}

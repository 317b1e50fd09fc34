package leaktest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/outbox-dev/outbox/internal/leaktest"
)

func blockUntil(c <-chan struct{}) { <-c }

// A goroutine started after the snapshot is reported, by its stack, while
// it runs, and no longer once it ended.
func TestLeaked_ReportsAGoroutineUntilItEnds(t *testing.T) {
	before := leaktest.Snapshot()
	stop := make(chan struct{})
	go blockUntil(stop)
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := leaktest.Leaked(before)
		if len(left) == 1 && strings.Contains(left.String(), "1 × github.com/outbox-dev/outbox/internal/leaktest_test.blockUntil\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Leaked with one goroutine blocked = %v, want blockUntil's stack once", left)
		}
		time.Sleep(time.Millisecond)
	}
	close(stop)
	leaktest.Check(t, before, 5*time.Second)
}

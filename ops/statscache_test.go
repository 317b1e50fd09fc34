package ops_test

import (
	"sync"
	"testing"
	"time"

	"github.com/outbox-dev/outbox/ops"
)

// Readers of a StatsCache within its interval share one snapshot (the same
// database clock reading); after the interval they get a new one.
func TestStatsCache_ReadersShareOneSnapshotPerInterval(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	const every = 300 * time.Millisecond
	c := ops.NewStatsCache(b.ops, every)
	first, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	firstEnded := time.Now() // the cache's read ended before this
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			s, err := c.Stats(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			if !s.At.Equal(first.At) && time.Since(firstEnded) < every {
				t.Errorf("a reader within the interval got a snapshot of %s, not the shared one of %s", s.At, first.At)
			}
		})
	}
	wg.Wait()
	time.Sleep(every + 50*time.Millisecond)
	later, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !later.At.After(first.At) {
		t.Fatalf("after the interval the snapshot is still of %s; want a new read", later.At)
	}
}

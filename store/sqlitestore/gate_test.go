package sqlitestore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func newGate(timeout time.Duration) *writeGate { return &writeGate{timeout: timeout} }

func TestWriteGate_AdmitsOneHolderAtATime(t *testing.T) {
	t.Parallel()
	g := newGate(10 * time.Second)
	var (
		holders, maxHolders atomic.Int32
		wg                  sync.WaitGroup
	)
	for range 8 {
		wg.Go(func() {
			for range 200 {
				if err := g.acquire(context.Background()); err != nil {
					t.Errorf("acquire: %v", err)
					return
				}
				n := holders.Add(1)
				for {
					m := maxHolders.Load()
					if n <= m || maxHolders.CompareAndSwap(m, n) {
						break
					}
				}
				if n%3 == 0 {
					time.Sleep(10 * time.Microsecond)
				}
				holders.Add(-1)
				g.release()
			}
		})
	}
	wg.Wait()
	if m := maxHolders.Load(); m != 1 {
		t.Errorf("%d goroutines held the gate at once, want 1", m)
	}
	if len(g.waiters) != 0 || g.held {
		t.Errorf("gate after all released: held %v, %d waiters", g.held, len(g.waiters))
	}
}

func TestWriteGate_WaitEndsWithContextAndGateStaysUsable(t *testing.T) {
	t.Parallel()
	g := newGate(10 * time.Second)
	if err := g.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := g.acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("acquire while held = %v, want the context's error", err)
	}
	g.release()
	if err := g.acquire(context.Background()); err != nil {
		t.Errorf("acquire after release: %v", err)
	}
	if len(g.waiters) != 0 {
		t.Errorf("%d waiters left behind", len(g.waiters))
	}
}

func TestWriteGate_WaitEndsWithTimeout(t *testing.T) {
	t.Parallel()
	g := newGate(20 * time.Millisecond)
	if err := g.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := g.acquire(context.Background()); !errors.Is(err, ErrWriteLockTimeout) {
		t.Errorf("acquire while held = %v, want ErrWriteLockTimeout", err)
	}
}

// A goroutine that releases and at once acquires again (a busy writer) must
// not keep the gate from a waiter for good: after starveAfter the gate is
// handed to the waiter.
func TestWriteGate_LongestWaiterIsNotStarvedByABusyHolder(t *testing.T) {
	t.Parallel()
	g := newGate(10 * time.Second)
	stop := make(chan struct{})
	var busy sync.WaitGroup
	busy.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := g.acquire(context.Background()); err != nil {
				t.Errorf("busy acquire: %v", err)
				return
			}
			time.Sleep(100 * time.Microsecond)
			g.release()
		}
	})
	time.Sleep(5 * time.Millisecond)
	// A hundred times starveAfter: far more than the hand-over needs.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := g.acquire(ctx)
	if err == nil {
		g.release()
	}
	close(stop)
	busy.Wait()
	if err != nil {
		t.Errorf("waiter behind a busy holder: %v", err)
	}
}

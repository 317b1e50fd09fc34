package memo_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-dev/outbox/internal/memo"
)

// However many callers ask at once, and however often, the read runs at
// most once per interval (plus the first), and never twice at once.
func TestGet_ManyCallersReadAtMostOncePerInterval(t *testing.T) {
	t.Parallel()
	const every = 50 * time.Millisecond
	var reads, running, overlaps atomic.Int64
	v := memo.New(func(context.Context) (int64, error) {
		if running.Add(1) > 1 {
			overlaps.Add(1)
		}
		defer running.Add(-1)
		time.Sleep(5 * time.Millisecond)
		return reads.Add(1), nil
	}, every, time.Second)

	start := time.Now()
	stop := start.Add(500 * time.Millisecond)
	var wg sync.WaitGroup
	var calls atomic.Int64
	for range 50 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				if n, err := v.Get(context.Background()); err != nil || n < 1 {
					t.Errorf("Get = %d, %v; want a read's result", n, err)
					return
				}
				calls.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	bound := int64(elapsed/every) + 1
	if n := reads.Load(); n > bound || n < 2 {
		t.Fatalf("%d reads for %d calls over %s; want between 2 and %d", n, calls.Load(), elapsed, bound)
	}
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d reads ran while another ran", n)
	}
}

// A caller that gives up gets its context's error at once; the read it
// started goes on, and a later caller gets its result.
func TestGet_CallerThatGivesUpDoesNotCancelTheRead(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	v := memo.New(func(ctx context.Context) (string, error) {
		select {
		case <-release:
			return "read", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}, time.Hour, 10*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := v.Get(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get with a cancelled context = %v; want context.Canceled", err)
	}
	close(release)
	if got, err := v.Get(context.Background()); err != nil || got != "read" {
		t.Fatalf("Get after the read = %q, %v; want the read's result", got, err)
	}
}

// An error is reused like a value, so a dependency that is down is not
// asked again by every caller; after the interval it is asked again.
func TestGet_ErrorIsReusedForTheInterval(t *testing.T) {
	t.Parallel()
	var reads atomic.Int64
	down := errors.New("down")
	v := memo.New(func(context.Context) (int, error) {
		if reads.Add(1) == 1 {
			return 0, down
		}
		return 7, nil
	}, 100*time.Millisecond, time.Second)
	for range 10 {
		if _, err := v.Get(context.Background()); !errors.Is(err, down) {
			t.Fatalf("Get = %v; want the first read's error", err)
		}
	}
	if n := reads.Load(); n != 1 {
		t.Fatalf("%d reads within the interval; want 1", n)
	}
	time.Sleep(120 * time.Millisecond)
	if got, err := v.Get(context.Background()); err != nil || got != 7 {
		t.Fatalf("Get after the interval = %d, %v; want a new read", got, err)
	}
}

// After Forget the next Get reads again, also when a read was running
// when Forget was called: its result goes to those that waited for it, and
// is not reused.
func TestForget_NextGetReadsAgain(t *testing.T) {
	t.Parallel()
	var reads atomic.Int64
	started, release := make(chan struct{}), make(chan struct{})
	v := memo.New(func(context.Context) (int64, error) {
		n := reads.Add(1)
		if n == 3 {
			close(started)
			<-release
		}
		return n, nil
	}, time.Hour, time.Minute)
	ctx := context.Background()
	if n, _ := v.Get(ctx); n != 1 {
		t.Fatalf("first Get = %d; want the first read", n)
	}
	if n, _ := v.Get(ctx); n != 1 {
		t.Fatalf("Get within the interval = %d; want the first read again", n)
	}
	v.Forget()
	if n, _ := v.Get(ctx); n != 2 {
		t.Fatalf("Get after Forget = %d; want a second read", n)
	}

	v.Forget()
	waited := make(chan int64)
	go func() { n, _ := v.Get(ctx); waited <- n }()
	<-started // the third read runs
	v.Forget()
	close(release)
	if n := <-waited; n != 3 {
		t.Fatalf("a caller that waited for the third read got %d", n)
	}
	if n, _ := v.Get(ctx); n != 4 {
		t.Fatalf("Get after a Forget during the third read = %d; want a fourth read", n)
	}
}

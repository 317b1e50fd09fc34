package lifecycle_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outbox-dev/outbox/internal/lifecycle"
)

// closedWithin reports whether c is closed within d.
func closedWithin(c <-chan struct{}, d time.Duration) bool {
	select {
	case <-c:
		return true
	case <-time.After(d):
		return false
	}
}

// A signal closes once, however many goroutines close it, and only the
// closing call's first runs, before the channel is closed.
func TestSignal_ClosesOnceAndRunsTheFirstCallersFunctionBefore(t *testing.T) {
	t.Parallel()
	s := lifecycle.NewSignal(nil)
	if s.Closed() {
		t.Fatal("a new signal is closed")
	}
	var ran atomic.Int32
	var sawOpen atomic.Bool
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			s.CloseWith(func() {
				ran.Add(1)
				sawOpen.Store(!s.Closed())
			})
		})
	}
	wg.Wait()
	s.Close() // again: no panic
	if !s.Closed() || !closedWithin(s.C(), time.Second) {
		t.Fatal("the signal is not closed after Close")
	}
	if n := ran.Load(); n != 1 {
		t.Fatalf("first ran %d times, want once", n)
	}
	if !sawOpen.Load() {
		t.Fatal("first ran after the signal was closed")
	}
}

// Sleep waits the whole duration while the signal is open, and returns
// false at once when it closes.
func TestSignal_SleepEndsWhenTheSignalCloses(t *testing.T) {
	t.Parallel()
	s := lifecycle.NewSignal(nil)
	start := time.Now()
	if !s.Sleep(20 * time.Millisecond) {
		t.Fatal("Sleep reported a stop while the signal was open")
	}
	if waited := time.Since(start); waited < 20*time.Millisecond {
		t.Fatalf("Sleep returned after %v, want at least 20ms", waited)
	}
	go func() {
		time.Sleep(10 * time.Millisecond)
		s.Close()
	}()
	start = time.Now()
	if s.Sleep(time.Minute) {
		t.Fatal("Sleep reported a full wait although the signal closed")
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("Sleep returned %v after the close", waited)
	}
}

// CloseOn closes the signal when the context ends.
func TestSignal_CloseOnClosesWhenTheContextEnds(t *testing.T) {
	t.Parallel()
	s := lifecycle.NewSignal(nil)
	ctx, cancel := context.WithCancel(t.Context())
	s.CloseOn(ctx)
	if closedWithin(s.C(), 20*time.Millisecond) {
		t.Fatal("the signal closed before its context ended")
	}
	cancel()
	if !closedWithin(s.C(), 10*time.Second) {
		t.Fatal("the signal did not close when its context ended")
	}
}

// Drain returns nil once done closes; after grace it expires the work in
// flight and waits on; when ctx ends first it cancels and returns ctx's
// error.
func TestDrain(t *testing.T) {
	t.Parallel()
	never := func(t *testing.T) func() { return func() { t.Error("called") } }

	t.Run("done within grace", func(t *testing.T) {
		t.Parallel()
		done := make(chan struct{})
		close(done)
		if err := lifecycle.Drain(t.Context(), done, time.Minute, never(t), never(t)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("grace passes, then done", func(t *testing.T) {
		t.Parallel()
		done := make(chan struct{})
		var expired atomic.Bool
		expire := func() { expired.Store(true); close(done) }
		if err := lifecycle.Drain(t.Context(), done, 10*time.Millisecond, expire, never(t)); err != nil {
			t.Fatal(err)
		}
		if !expired.Load() {
			t.Fatal("expire was not called")
		}
	})
	t.Run("ctx ends first", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		var cancelled atomic.Bool
		err := lifecycle.Drain(ctx, make(chan struct{}), time.Minute, never(t), func() { cancelled.Store(true) })
		if !errors.Is(err, context.Canceled) || !cancelled.Load() {
			t.Fatalf("Drain = %v, cancel called %v; want context.Canceled and true", err, cancelled.Load())
		}
	})
	t.Run("ctx ends after grace", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		var expired atomic.Bool
		expire := func() { expired.Store(true); cancel() }
		err := lifecycle.Drain(ctx, make(chan struct{}), 10*time.Millisecond, expire, never(t))
		if !errors.Is(err, context.Canceled) || !expired.Load() {
			t.Fatalf("Drain = %v, expired %v; want context.Canceled and true", err, expired.Load())
		}
	})
}

// The signal's onClose runs once, after the channel is closed, in the call
// that closes it.
func TestSignal_OnCloseRunsOnceAfterTheClose(t *testing.T) {
	t.Parallel()
	var s *lifecycle.Signal
	var ran atomic.Int32
	var sawClosed atomic.Bool
	s = lifecycle.NewSignal(func() {
		ran.Add(1)
		sawClosed.Store(s.Closed())
	})
	s.Close()
	if n := ran.Load(); n != 1 {
		t.Fatalf("onClose ran %d times by the closing call, want once", n)
	}
	s.Close()
	s.CloseWith(func() { t.Error("first ran on a closed signal") })
	if n := ran.Load(); n != 1 {
		t.Fatalf("onClose ran %d times, want once", n)
	}
	if !sawClosed.Load() {
		t.Fatal("onClose ran before the signal was closed")
	}
}

// Run starts once; its Stop closes the signal, reports whether the
// component started, and waits for a Start that is running.
func TestRun_StartsOnceAndStopWaitsForARunningStart(t *testing.T) {
	t.Parallel()
	errAgain := errors.New("already started")

	var never lifecycle.Run
	s := lifecycle.NewSignal(nil)
	if never.Stop(s) || !s.Closed() {
		t.Fatal("Stop of a run never started: want false and a closed signal")
	}

	var r lifecycle.Run
	inStart, release := make(chan struct{}), make(chan struct{})
	var starts atomic.Int32
	go func() {
		_ = r.Start(errAgain, func() error {
			starts.Add(1)
			close(inStart)
			<-release
			return nil
		})
	}()
	<-inStart
	stopped := make(chan bool)
	go func() { stopped <- r.Stop(lifecycle.NewSignal(nil)) }()
	select {
	case <-stopped:
		t.Fatal("Stop returned while Start was running")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	if !<-stopped {
		t.Fatal("Stop after Start reported not started")
	}
	if err := r.Start(errAgain, func() error { starts.Add(1); return nil }); !errors.Is(err, errAgain) {
		t.Fatalf("second Start = %v, want %v", err, errAgain)
	}
	if n := starts.Load(); n != 1 {
		t.Fatalf("start ran %d times, want once", n)
	}
}

// Every ticks at its interval, not at once, and stops when tick says so or
// when ctx ends.
func TestEvery_TicksUntilToldOrTheContextEnds(t *testing.T) {
	t.Parallel()
	start := time.Now()
	var ticks int
	var first time.Duration
	lifecycle.Every(t.Context(), 10*time.Millisecond, func() bool {
		ticks++
		if ticks == 1 {
			first = time.Since(start)
		}
		return ticks < 3
	})
	if ticks != 3 {
		t.Fatalf("ticked %d times, want 3 (until tick returned false)", ticks)
	}
	if first < 10*time.Millisecond {
		t.Fatalf("first tick after %v, want one interval", first)
	}

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		lifecycle.Every(ctx, time.Millisecond, func() bool { return true })
	}()
	cancel()
	if !closedWithin(done, 10*time.Second) {
		t.Fatal("Every did not return when its context ended")
	}
}

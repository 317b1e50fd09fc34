// Package lifecycle holds the plumbing that the long-running parts share
// (relay.Relay, cdc.Relay, the consumer's runner and partition workers,
// pgstore's lease keeper): the start-once state, a stop signal that is
// closed once and that waits and sleeps watch, the bounded wait of a Stop
// for the work in flight, and work repeated at an interval.
package lifecycle

import (
	"context"
	"sync"
	"time"
)

// Run records whether a component was started, for its Start and Stop:
// the start function runs once, and a Stop that comes while it runs waits
// for it. The zero value is ready to use.
type Run struct {
	mu      sync.Mutex
	started bool
}

// Start runs start, and returns its error, until a start succeeded; later
// calls return already. A Stop after a failed start reports that the
// component was not started.
func (r *Run) Start(already error, start func() error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return already
	}
	if err := start(); err != nil {
		return err
	}
	r.started = true
	return nil
}

// Stop closes stopping and reports whether the component was started,
// after a Start that is running has returned.
func (r *Run) Stop(stopping *Signal) (started bool) {
	r.mu.Lock()
	started = r.started
	r.mu.Unlock()
	stopping.Close()
	return started
}

// Signal is a stop signal: a channel closed once, by the first Close or
// CloseWith. Create it with [NewSignal]; it is safe for concurrent use.
type Signal struct {
	once    sync.Once
	c       chan struct{}
	onClose func()
}

// NewSignal returns a signal that is not closed. onClose, if not nil, runs
// once, right after the signal closes, in the call that closes it.
func NewSignal(onClose func()) *Signal { return &Signal{c: make(chan struct{}), onClose: onClose} }

// Close closes the signal; calling it again does nothing.
func (s *Signal) Close() { s.CloseWith(nil) }

// CloseWith closes the signal, running first (if not nil) just before, so
// that whoever sees the signal closed also sees what first wrote. Only the
// call that closes the signal runs its first; later calls do nothing.
func (s *Signal) CloseWith(first func()) {
	s.once.Do(func() {
		if first != nil {
			first()
		}
		close(s.c)
		if s.onClose != nil {
			s.onClose()
		}
	})
}

// CloseOn closes the signal when ctx is done, unless it is closed before.
// It returns at once; the goroutine it starts ends with whichever comes
// first.
func (s *Signal) CloseOn(ctx context.Context) {
	go func() {
		select {
		case <-ctx.Done():
			s.Close()
		case <-s.c:
		}
	}()
}

// C returns the channel that the signal closes.
func (s *Signal) C() <-chan struct{} { return s.c }

// Closed reports whether the signal is closed.
func (s *Signal) Closed() bool {
	select {
	case <-s.c:
		return true
	default:
		return false
	}
}

// Sleep waits d, or until the signal is closed; it reports false when the
// signal is closed.
func (s *Signal) Sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.c:
		return false
	}
}

// Drain is the wait of a Stop for the work in flight: it returns nil when
// done is closed. When grace passes first it calls expire, which cancels
// what is still in flight, and waits on for done. When ctx ends first it
// calls cancel and returns ctx's error without waiting further.
func Drain(ctx context.Context, done <-chan struct{}, grace time.Duration, expire, cancel func()) error {
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-done:
		return nil
	case <-timer.C:
		expire()
	case <-ctx.Done():
		cancel()
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Every calls tick every d, the first time d after it is called, until
// ctx ends or tick returns false.
func Every(ctx context.Context, d time.Duration, tick func() bool) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !tick() {
			return
		}
	}
}

// Package memo shares the result of a read among any number of callers:
// the read runs at most once per interval, callers that arrive while it runs
// wait for that run rather than starting another, and a caller that gives up
// does not cancel it. The admin endpoint uses it so that its scrapers and
// probes cost the database a bounded number of queries, however many there
// are.
package memo

import (
	"context"
	"sync"
	"time"
)

// ReadFunc produces the value; its error is shared like a value.
type ReadFunc[T any] func(ctx context.Context) (T, error)

// Value is a result of a ReadFunc, reused for an interval. Create it with
// [New]; it is safe for concurrent use.
type Value[T any] struct {
	read    ReadFunc[T]
	every   time.Duration
	timeout time.Duration

	mu      sync.Mutex
	val     T
	err     error
	readAt  time.Time     // when the last read ended; zero before the first
	running chan struct{} // closed when the running read ends; nil when none runs
	forgot  uint64        // counts Forget calls
}

// New returns a Value that calls read at most once per every, each call
// bounded by timeout. Reads never overlap, so over a span d read runs at
// most d/every + 1 times.
func New[T any](read ReadFunc[T], every, timeout time.Duration) *Value[T] {
	return &Value[T]{read: read, every: every, timeout: timeout}
}

// Get returns the result of the last read if it ended less than the
// interval ago. Otherwise it starts a read, unless one runs already, and
// waits for it or for ctx, whichever ends first.
func (v *Value[T]) Get(ctx context.Context) (T, error) {
	v.mu.Lock()
	if v.running == nil && (v.readAt.IsZero() || time.Since(v.readAt) >= v.every) {
		v.running = make(chan struct{})
		go v.refresh(v.running)
	}
	running := v.running
	if running == nil {
		defer v.mu.Unlock()
		return v.val, v.err
	}
	v.mu.Unlock()
	select {
	case <-running:
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.val, v.err
}

// Forget makes the next Get read again, as after a change that the value
// does not show yet. A read that runs when Forget is called may have begun
// before the change: the callers that wait for it get its result, but it
// is not reused.
func (v *Value[T]) Forget() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.readAt = time.Time{}
	v.forgot++
}

// refresh runs one read, detached from the callers that wait for it.
func (v *Value[T]) refresh(done chan struct{}) {
	v.mu.Lock()
	forgot := v.forgot
	v.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), v.timeout)
	val, err := v.read(ctx)
	cancel()
	v.mu.Lock()
	v.val, v.err, v.readAt, v.running = val, err, time.Now(), nil
	if v.forgot != forgot {
		v.readAt = time.Time{}
	}
	v.mu.Unlock()
	close(done)
}

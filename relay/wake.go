package relay

import (
	"sync"
	"time"
)

// waker broadcasts wake-ups to every waiting worker.
type waker struct {
	mu sync.Mutex
	ch chan struct{}
}

func (w *waker) init() { w.ch = make(chan struct{}) }

// wait returns a channel closed by the next broadcast.
func (w *waker) wait() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ch
}

func (w *waker) broadcast() {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.ch)
	w.ch = make(chan struct{})
}

// watchSlowPublish watches a publish that starts now; call the function it
// returns when the publish returned. If the publish waits for its acks
// longer than Config.SlowPublish, it counts in r.slow, so that the helpers
// claim beside it, and wakes them; it wakes them again after 2, 4, 8 ...
// times that (at most PollInterval apart) while the publish still waits,
// so that a helper whose claim came back empty claims again for messages
// that arrived meanwhile, without polling a long stall at a high rate.
func (r *Relay) watchSlowPublish() (done func()) {
	if r.cfg.SlowPublish <= 0 {
		return func() {}
	}
	stop := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		d := r.cfg.SlowPublish
		t := time.NewTimer(d)
		defer t.Stop()
		counted := false
		for {
			select {
			case <-stop:
				if counted {
					r.slow.Add(-1)
				}
				return
			case <-t.C:
				if !counted {
					r.slow.Add(1)
					counted = true
				}
				r.wake.broadcast()
				d = min(2*d, r.cfg.PollInterval)
				t.Reset(d)
			}
		}
	}()
	return func() {
		close(stop)
		<-ended
	}
}

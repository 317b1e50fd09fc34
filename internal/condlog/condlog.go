// Package condlog decides when to log a lasting condition, such as missing
// tables that the relay retries against: when it begins, again at most once
// per interval while it lasts, and once when it ends, rather than at every
// retry.
package condlog

import (
	"sync"
	"sync/atomic"
	"time"
)

// Condition is one lasting condition. The zero value is ready to use (with
// an interval of [DefaultEvery]); it is safe for concurrent use.
type Condition struct {
	// Every is the least time between two reports of the condition while
	// it lasts. Defaults to DefaultEvery.
	Every time.Duration

	active atomic.Bool
	mu     sync.Mutex
	since  time.Time // when it began
	last   time.Time // when it was last reported
}

// DefaultEvery is the default of Condition.Every.
const DefaultEvery = 30 * time.Second

// Holds records that the condition holds at now. It reports whether the
// caller should log it: when it begins, and when Every has passed since it
// was last logged.
func (c *Condition) Holds(now time.Time) (log bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	every := c.Every
	if every <= 0 {
		every = DefaultEvery
	}
	if !c.active.Load() {
		c.active.Store(true)
		c.since, c.last = now, now
		return true
	}
	if now.Sub(c.last) >= every {
		c.last = now
		return true
	}
	return false
}

// Ended records that the condition does not hold at now. It reports
// whether it held until then (the caller should log that it ended), and
// for how long. It costs one atomic load while the condition does not hold.
func (c *Condition) Ended(now time.Time) (lasted time.Duration, ended bool) {
	if !c.active.Load() {
		return 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.active.Load() {
		return 0, false
	}
	c.active.Store(false)
	return now.Sub(c.since), true
}

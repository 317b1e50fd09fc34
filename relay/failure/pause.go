package failure

import (
	"sync"
	"time"
)

// PauseStart is a Pause's first length; DefaultPauseMax its longest by
// default.
const (
	PauseStart      = 500 * time.Millisecond
	DefaultPauseMax = 30 * time.Second
)

// Pause is how long a relay waits, as a whole, while the broker is
// unreachable: PauseStart after the first failure, then twice the last
// length for each failure after a pause ended, up to its maximum, until
// Reset. Failures during a pause lengthen it to their own time plus the
// current length, without doubling it. It is safe for concurrent use; the
// zero value is a Pause with DefaultPauseMax.
type Pause struct {
	max time.Duration

	mu    sync.Mutex
	cur   time.Duration
	until time.Time
}

// NewPause returns a Pause that grows up to max (DefaultPauseMax if max is
// not positive).
func NewPause(max time.Duration) *Pause { return &Pause{max: max} }

// Next records a failure at now and returns the pause from now on.
func (p *Pause) Next(now time.Time) time.Duration {
	limit := p.max
	if limit <= 0 {
		limit = DefaultPauseMax
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.cur == 0:
		p.cur = min(PauseStart, limit)
	case now.After(p.until): // failing again after the last pause
		p.cur = min(2*p.cur, limit)
	}
	p.until = now.Add(p.cur)
	return p.cur
}

// Remaining is how long the pause lasts after now: 0 when there is none
// (or another caller has reset it since).
func (p *Pause) Remaining(now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return max(0, p.until.Sub(now))
}

// Reset ends the pause, and the next failure starts again at PauseStart.
// Call it when the broker answered.
func (p *Pause) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cur, p.until = 0, time.Time{}
}

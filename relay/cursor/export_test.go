package cursor

import "time"

// Hang stops renewing the Strategy's lead, as in a process that hangs (or
// dies): the lease runs out unless a round trip of the Strategy saves, and
// the Strategy believes it leads until its local check finds the lease
// about to end.
func (s *Strategy) Hang() {
	cs := &s.cs
	cs.mu.Lock()
	cs.stopKeeper()
	done := cs.keepDone
	cs.mu.Unlock()
	if done != nil {
		<-done
	}
}

// SetLeadIdleLimit sets how long the Strategy may lead without a claim
// (leadIdleLimit), for tests.
func (s *Strategy) SetLeadIdleLimit(d time.Duration) { s.leadIdle = d }

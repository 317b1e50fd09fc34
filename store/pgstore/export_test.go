package pgstore

import (
	"context"
	"slices"
	"time"

	"github.com/outbox-dev/outbox/internal/migrate"
)

// ClaimSQL exposes the rendered claim statement to the EXPLAIN test.
func (s *Store) ClaimSQL() string { return s.q.claim }

// ChannelName exposes channelName to tests.
var ChannelName = channelName

// ClaimFloorSQL exposes the rendered claim-floor statement to the EXPLAIN
// tests.
func (s *Store) ClaimFloorSQL() string { return s.q.claimFloor }

// ClaimSpan is claimSpan, for tests.
func ClaimSpan(limit int) int64 { return claimSpan(limit) }

// MigrateThrough is Migrate with the embedded migrations up to version
// only, as a release of that version would apply them.
func (s *Store) MigrateThrough(ctx context.Context, version int) error {
	all := s.migrations
	defer func() { s.migrations = all }()
	s.migrations = slices.DeleteFunc(slices.Clone(all), func(m migrate.Migration) bool { return m.Version > version })
	return s.Migrate(ctx)
}

// Hang stops renewing the Cursor's lead, as in a process that hangs (or
// dies): the lease runs out unless a round trip of the Cursor saves, and
// the Cursor believes it leads until its local check finds the lease about
// to end.
func (c *Cursor) Hang() {
	cs := &c.cs
	cs.mu.Lock()
	cs.stopKeeper()
	done := cs.keepDone
	cs.mu.Unlock()
	if done != nil {
		<-done
	}
}

// SetLeadIdleLimit sets how long the Cursor may lead without a claim
// (leadIdleLimit), for tests.
func (c *Cursor) SetLeadIdleLimit(d time.Duration) { c.leadIdle = d }

package pgstore

import (
	"context"
	"slices"

	"github.com/outbox-dev/outbox/internal/migrate"
)

// ClaimSQL exposes the rendered claim statement to the EXPLAIN test.
func (s *Store) ClaimSQL() string { return s.q.claim }

// ClaimRunSQL exposes the rendered claim of runs to the EXPLAIN tests.
func (s *Store) ClaimRunSQL() string { return s.q.claimRun }

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

package sqlitestore

import (
	"context"
	"slices"

	"github.com/outbox-dev/outbox/internal/migrate"
)

// CleanupSQL exposes a rendered statement to the query plan tests.
func (s *Store) CleanupSQL() string { return s.q.cleanup }

// ClaimStep is one statement of a claim, with arguments for EXPLAIN.
type ClaimStep struct {
	Name, SQL string
	Args      []any
}

// ClaimSteps are the rendered statements of a claim, in order.
func (s *Store) ClaimSteps() []ClaimStep {
	return []ClaimStep{
		{"claim_first_due", s.q.claimFirstDue, nil},
		{"claim_by_seq", s.q.claimBySeq, []any{10, 1, 257}},
		{"claim_beyond", s.q.claimBeyond, []any{257}},
		{"claim_by_aggregate", s.q.claimByAggregate, []any{"order", "1", true, "order", "9", 256}},
		{"claim_run", s.q.claimRun, []any{1, 9}},
		{"claim", s.q.claim, []any{"[1,2,3]", "r", "token", 1000}},
	}
}

// ClaimSpan is claimSpan for tests.
func ClaimSpan(limit int) int { return claimSpan(limit) }

// MigrateThrough is Migrate with the embedded migrations up to version
// only, as a release of that version would apply them.
func (s *Store) MigrateThrough(ctx context.Context, version int) error {
	all := s.migrations
	defer func() { s.migrations = all }()
	s.migrations = slices.DeleteFunc(slices.Clone(all), func(m migrate.Migration) bool { return m.Version > version })
	return s.Migrate(ctx)
}

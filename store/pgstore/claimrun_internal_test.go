package pgstore

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox/store"
)

// MaxRun 0 and 1 (and below) run the claim of heads only, claim.sql with
// its eight arguments; above 1 the claim of runs, with MaxRun and
// MaxRunBytes (a negative one counts as no bound).
func TestClaimStatement_HeadsOnlyUnlessMaxRunAboveOne(t *testing.T) {
	t.Parallel()
	s := &Store{q: queries{claim: "claim.sql", claimRun: "claim_run.sql"}}
	for _, tc := range []struct {
		maxRun, maxRunBytes int
		want                string
		extra               []any
	}{
		{-1, 100, "claim.sql", nil},
		{0, 100, "claim.sql", nil},
		{1, 100, "claim.sql", nil},
		{2, 100, "claim_run.sql", []any{int64(2), int64(100)}},
		{50, -5, "claim_run.sql", []any{int64(50), int64(0)}},
	} {
		p := store.ClaimParams{Owner: "r", Limit: 10, Lease: time.Minute, MaxRun: tc.maxRun, MaxRunBytes: tc.maxRunBytes}
		sql, args := s.claimStatement(&p, uuid.New(), 7, aggregateKey{"Order", "a"})
		if sql != tc.want || len(args) != 8+len(tc.extra) {
			t.Errorf("MaxRun %d: %s with %d arguments; want %s with %d", tc.maxRun, sql, len(args), tc.want, 8+len(tc.extra))
			continue
		}
		for i, x := range tc.extra {
			if args[8+i] != x {
				t.Errorf("MaxRun %d: argument %d is %v; want %v", tc.maxRun, 9+i, args[8+i], x)
			}
		}
	}
}

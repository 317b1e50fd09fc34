package sqlitestore

import (
	"context"
	"database/sql"
	"slices"

	"github.com/outbox-dev/outbox/store"
)

// claimFollowers returns the followers of heads for a claim of p, in tx:
// for each head the unsent messages of its aggregate right after it in seq
// order, up to the first that is not due or would take the run's payload
// beyond p.MaxRunBytes, at most p.MaxRun-1; and of those as many as the
// room the heads leave in p.Limit, rank by rank (fillByRank). None when
// p.MaxRun is 1 or less.
func (s *Store) claimFollowers(ctx context.Context, tx *sql.Tx, heads []int64, p store.ClaimParams) ([]int64, error) {
	room := p.Limit - len(heads)
	if p.MaxRun <= 1 || room <= 0 {
		return nil, nil
	}
	most := min(p.MaxRun-1, room)
	byHead := slices.Sorted(slices.Values(heads))
	runs := make([][]int64, len(byHead))
	for i, head := range byHead {
		run, err := s.runAfter(ctx, tx, head, most, p.MaxRunBytes)
		if err != nil {
			return nil, err
		}
		runs[i] = run
	}
	return fillByRank(runs, room), nil
}

// runAfter returns the followers of head (queries/claim_run.sql): at most
// most, in seq order, up to the first that is not due or would take the
// payload of the run, head included, beyond maxBytes (0 or less: no bound).
func (s *Store) runAfter(ctx context.Context, tx *sql.Tx, head int64, most, maxBytes int) ([]int64, error) {
	rows, err := tx.QueryContext(ctx, s.q.claimRun, head, most)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var (
		run   []int64
		total int64 // the run's payload bytes
	)
	for first := true; rows.Next(); first = false {
		var (
			seq, size, headSize int64
			due                 bool
		)
		if err := rows.Scan(&seq, &due, &size, &headSize); err != nil {
			return nil, err
		}
		if first {
			total = headSize
		}
		total += size
		if !due || (maxBytes > 0 && total > int64(maxBytes)) {
			break
		}
		run = append(run, seq)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return run, rows.Close()
}

// fillByRank takes up to room followers from runs (each a head's, in the
// order of the heads) rank by rank: every run's first before any run's
// second, and so on. Each run keeps a prefix of its followers.
func fillByRank(runs [][]int64, room int) []int64 {
	var out []int64
	for rank := 0; len(out) < room; rank++ {
		more := false
		for _, run := range runs {
			if rank >= len(run) {
				continue
			}
			more = true
			out = append(out, run[rank])
			if len(out) == room {
				return out
			}
		}
		if !more {
			break
		}
	}
	return out
}

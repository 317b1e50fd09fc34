package sqlitestore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/store"
)

// Claim leases up to p.Limit due messages to p.Owner for p.Lease under a
// new random token, with the guarantees of [store.Queue]: only due messages,
// of each aggregate its head (and with runs the messages right after it),
// never a message another claim holds. It is a short write transaction of
// its own; no transaction stays open afterwards. Records are in Seq order
// (so each aggregate's in its order); a row whose headers are not a JSON
// object of string values is among them with Invalid set (see
// [store.Queue]). A Limit below 1 claims nothing; a Lease shorter than a
// millisecond is an error, since such a lease would expire at once.
//
// With p.MaxRun above 1 it claims runs: each head comes with its followers,
// the unsent messages of its aggregate right after it in seq order, taken
// in order while each is due and within p.MaxRunBytes of payload (the head
// included; the head comes whatever its size), at most p.MaxRun - 1 of
// them. A run never skips a message: it ends before the first it cannot
// take. The heads fill the batch first, as without runs; the followers fill
// the rest of p.Limit rank by rank (every head's first follower before any
// head's second; within a rank in the order of the heads' seqs). Every
// record is under the claim's token, and MarkSent, MarkFailed and Release
// take any subset of them. With p.MaxRun 0 or 1 the claim is of heads only.
//
// The heads come from a walk in seq order over claimSpan(Limit) seqs from
// the first due message (oldest first) and, when that finds too few and a
// message beyond them is due, from a scan by aggregate that visits at most
// as many aggregates, starting after the aggregate the previous scan ended
// with. So a claim reads a bounded part of the backlog however the backlog
// spreads over aggregates, and no aggregate waits for the others to drain.
func (s *Store) Claim(ctx context.Context, p store.ClaimParams) (store.Claim, error) {
	if p.Lease < time.Millisecond {
		return store.Claim{}, fmt.Errorf("sqlitestore: claim: Lease %v must be at least 1ms", p.Lease)
	}
	token, err := uuid.NewRandom()
	if err != nil {
		return store.Claim{}, fmt.Errorf("sqlitestore: claim: new token: %w", err)
	}
	c := store.Claim{Token: token}
	if p.Limit < 1 {
		return c, nil
	}
	// A write transaction of its own: through a *sql.DB from Open it takes
	// the write lock at BEGIN (and the process's write gate before that),
	// so nothing changes between the steps.
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return store.Claim{}, fmt.Errorf("sqlitestore: claim: begin: %w", err)
	}
	defer tx.Rollback() // a no-op after Commit
	seqs, err := s.claimHeads(ctx, tx, p.Limit)
	if err != nil {
		return store.Claim{}, fmt.Errorf("sqlitestore: claim: %w", err)
	}
	followers, err := s.claimFollowers(ctx, tx, seqs, p)
	if err != nil {
		return store.Claim{}, fmt.Errorf("sqlitestore: claim: %w", err)
	}
	seqs = append(seqs, followers...)
	if len(seqs) > 0 {
		rows, err := tx.QueryContext(ctx, s.q.claim, jsonSeqs(seqs), p.Owner, token.String(), p.Lease.Milliseconds())
		if err != nil {
			return store.Claim{}, fmt.Errorf("sqlitestore: claim: %w", err)
		}
		if c.Records, err = collectRecords(rows); err != nil {
			return store.Claim{}, fmt.Errorf("sqlitestore: claim: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return store.Claim{}, fmt.Errorf("sqlitestore: claim: commit: %w", err)
	}
	slices.SortFunc(c.Records, func(a, b outbox.Record) int { return cmp.Compare(a.Seq, b.Seq) })
	return c, nil
}

// claimSpan is how many seqs past the first due message a claim of limit
// walks in seq order, and the most aggregates its scan by aggregate
// visits: four times the batch, at least 256.
func claimSpan(limit int) int { return max(4*limit, 256) }

// claimHeads returns the seqs of up to limit claimable heads, in tx.
func (s *Store) claimHeads(ctx context.Context, tx *sql.Tx, limit int) ([]int64, error) {
	var first int64
	switch err := tx.QueryRowContext(ctx, s.q.claimFirstDue).Scan(&first); {
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil // nothing is due
	case err != nil:
		return nil, err
	}
	span := claimSpan(limit)
	end := first + int64(span)
	seqs, err := querySeqs(ctx, tx, s.q.claimBySeq, limit, first, end)
	if err != nil {
		return nil, err
	}
	if len(seqs) == limit {
		return seqs, nil
	}
	var beyond int64
	switch err := tx.QueryRowContext(ctx, s.q.claimBeyond, end).Scan(&beyond); {
	case errors.Is(err, sql.ErrNoRows):
		return seqs, nil // the walk saw every due message
	case err != nil:
		return nil, err
	}
	// The walk took every due head in its span, so a head the scan by
	// aggregate finds is new unless it is one of these.
	taken := make(map[int64]bool, len(seqs))
	for _, seq := range seqs {
		taken[seq] = true
	}
	return s.claimByAggregate(ctx, tx, seqs, limit, span, taken)
}

// claimByAggregate appends to seqs due heads that are not taken, from the
// scan by aggregate, until seqs holds limit or steps aggregates were
// visited, and moves the store's rotation to the last aggregate visited.
func (s *Store) claimByAggregate(ctx context.Context, tx *sql.Tx, seqs []int64, limit, steps int, taken map[int64]bool) ([]int64, error) {
	start := s.rotation.get()
	// The first pass runs from after start to the last aggregate, the
	// second (the wrap-around) from the first aggregate up to start.
	type pass struct {
		after, stop aggregateKey
		bounded     bool // stop at stop
	}
	passes := []pass{{after: start}}
	if start != (aggregateKey{}) {
		passes = append(passes, pass{stop: start, bounded: true})
	}
	var last aggregateKey
	visited := false
	for _, pass := range passes {
		if steps == 0 || len(seqs) == limit {
			break
		}
		rows, err := tx.QueryContext(ctx, s.q.claimByAggregate,
			pass.after.typ, pass.after.id, pass.bounded, pass.stop.typ, pass.stop.id, steps)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var (
				seq int64
				key aggregateKey
				due bool
			)
			if err := rows.Scan(&seq, &key.typ, &key.id, &due); err != nil {
				rows.Close()
				return nil, err
			}
			steps--
			last, visited = key, true
			if due && !taken[seq] {
				seqs = append(seqs, seq)
				if len(seqs) == limit {
					break
				}
			}
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	if visited {
		s.rotation.set(last)
	}
	return seqs, nil
}

// querySeqs runs a query of one seq column in tx.
func querySeqs(ctx context.Context, tx *sql.Tx, query string, args ...any) ([]int64, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var seqs []int64
	for rows.Next() {
		var seq int64
		if err := rows.Scan(&seq); err != nil {
			return nil, err
		}
		seqs = append(seqs, seq)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return seqs, rows.Close()
}

// aggregateKey is an aggregate's key in messages_unsent_by_aggregate; the
// zero key sorts before every aggregate (an aggregate id is never empty).
type aggregateKey struct{ typ, id string }

// rotation is the aggregate the store's last scan by aggregate ended with.
type rotation struct {
	mu  sync.Mutex
	key aggregateKey
}

func (r *rotation) get() aggregateKey {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.key
}

func (r *rotation) set(k aggregateKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.key = k
}

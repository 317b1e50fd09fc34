package pgstore

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-dev/outbox/internal/errtext"
	"github.com/outbox-dev/outbox/store"
)

// MarkSent marks the messages SENT, with PublishedAt the database's now, if
// they are still IN_FLIGHT under token, and returns how many it changed. It
// is one statement in one round trip.
//
// MarkSent, MarkFailed and Release change rows of the table that a claim
// of the Store holds, in any mode: a claim made just before the outbox
// switched to cursor mode is marked as any other (a cursor message is
// never held under a Store's token).
func (s *Store) MarkSent(ctx context.Context, token uuid.UUID, seqs []int64) (int64, error) {
	if len(seqs) == 0 {
		return 0, nil
	}
	n, _, err := s.markAndClaim(ctx, token, seqs, nil)
	if err != nil {
		return 0, fmt.Errorf("pgstore: mark sent: %w", s.explain(err))
	}
	return n, nil
}

// MarkFailed records failed publishes, if the messages are still IN_FLIGHT
// under token, and returns how many it changed. Each message becomes FAILED
// (or DEAD_LETTER when Dead) with NextAttemptAt = now + Delay (a negative
// Delay counts as zero), LastError = Error (cut to 4,000 bytes), and
// Attempts one higher when CountAttempt. If a Seq appears twice, the last
// Failure for it wins.
//
// Each failure that counts an attempt or dead-letters the message is also
// recorded in the table outbox_attempts (attempt number, error, time), in
// the same statement, for the dead-letter tools of package ops. It is one
// round trip.
func (s *Store) MarkFailed(ctx context.Context, token uuid.UUID, failures []store.Failure) (int64, error) {
	if len(failures) == 0 {
		return 0, nil
	}
	f := newFailureArgs(failures)
	var changed int64
	b := s.relayBatch()
	b.Queue(s.q.markFailed, token, f.seqs, f.errs, f.delays, f.counts, f.deads, f.queued, (*uuid.UUID)(nil)).
		QueryRow(func(row pgx.Row) error { return row.Scan(&changed) })
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return 0, fmt.Errorf("pgstore: mark failed: %w", s.explain(err))
	}
	return changed, nil
}

// failureArgs are the column arrays of mark_failed.sql: one element per
// message, the last Failure of a seq winning.
type failureArgs struct {
	seqs   []int64
	errs   []string
	delays []int64
	counts []bool
	deads  []bool
	queued []bool // a cursor message (cursor mode); false for claimed ones
}

func newFailureArgs(failures []store.Failure) failureArgs {
	visited := make(map[int64]bool, len(failures))
	var f failureArgs
	for i := len(failures) - 1; i >= 0; i-- {
		x := failures[i]
		if visited[x.Seq] {
			continue
		}
		visited[x.Seq] = true
		f.seqs = append(f.seqs, x.Seq)
		f.errs = append(f.errs, errtext.Clean(x.Error))
		f.delays = append(f.delays, max(x.Delay, 0).Milliseconds())
		f.counts = append(f.counts, x.CountAttempt)
		f.deads = append(f.deads, x.Dead)
		f.queued = append(f.queued, false)
	}
	return f
}

// Release gives the messages back, due at once and without counting an
// attempt (PENDING, or FAILED if they had failed before), if they are still
// IN_FLIGHT under token. It returns how many it changed.
func (s *Store) Release(ctx context.Context, token uuid.UUID, seqs []int64) (int64, error) {
	if len(seqs) == 0 {
		return 0, nil
	}
	n, err := s.releaseTable(ctx, token, seqs)
	if err != nil {
		return 0, fmt.Errorf("pgstore: release: %w", s.explain(err))
	}
	return n, nil
}

// releaseTable releases claimed messages in the table (release.sql).
func (s *Store) releaseTable(ctx context.Context, token uuid.UUID, seqs []int64) (int64, error) {
	var released int64
	b := s.relayBatch()
	b.Queue(s.q.release, seqs, token).Exec(func(tag pgconn.CommandTag) error {
		released = tag.RowsAffected()
		return nil
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return 0, err
	}
	return released, nil
}

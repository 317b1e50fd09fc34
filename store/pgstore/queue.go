package pgstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/failpoint"
	"github.com/outbox-dev/outbox/store"
)

// maxLastErrorBytes bounds the error text kept per message.
const maxLastErrorBytes = 4000

// Claim leases up to p.Limit due messages to p.Owner for p.Lease under a
// new random token, with the guarantees of [store.Queue]: only due messages,
// only the head of each aggregate, never a message another claim holds. It is
// one autocommit statement; no transaction stays open afterwards. Records
// are in Seq order. A Limit below 1 claims nothing; a Lease shorter than a
// millisecond is an error, since such a lease would expire at once.
func (s *Store) Claim(ctx context.Context, p store.ClaimParams) (store.Claim, error) {
	if p.Lease < time.Millisecond {
		return store.Claim{}, fmt.Errorf("pgstore: claim: Lease %v must be at least 1ms", p.Lease)
	}
	token, err := uuid.NewRandom()
	if err != nil {
		return store.Claim{}, fmt.Errorf("pgstore: claim: new token: %w", err)
	}
	c := store.Claim{Token: token}
	if p.Limit < 1 {
		return c, nil
	}
	rows, err := s.pool.Query(ctx, s.q.claim, p.Limit, p.Owner, token, p.Lease.Milliseconds())
	if err != nil {
		return store.Claim{}, fmt.Errorf("pgstore: claim: %w", err)
	}
	recs, err := pgx.CollectRows(rows, scanRecord)
	if err != nil {
		return store.Claim{}, fmt.Errorf("pgstore: claim: %w", err)
	}
	slices.SortFunc(recs, func(a, b outbox.Record) int { return cmp.Compare(a.Seq, b.Seq) })
	c.Records = recs
	return c, nil
}

// MarkSent marks the messages SENT, with PublishedAt the database's now, if
// they are still IN_FLIGHT under token, and returns how many it changed. It
// runs in a short transaction of its own.
func (s *Store) MarkSent(ctx context.Context, token uuid.UUID, seqs []int64) (int64, error) {
	if len(seqs) == 0 {
		return 0, nil
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("pgstore: mark sent: begin: %w", err)
	}
	defer tx.Rollback(ctx) // a no-op after Commit
	tag, err := tx.Exec(ctx, s.q.markSent, seqs, token)
	if err != nil {
		return 0, fmt.Errorf("pgstore: mark sent: %w", err)
	}
	// A crash test stops the process here: the broker has the messages but
	// the database does not know, so they must be published again.
	failpoint.Inject("pgstore-mark-sent-before-commit")
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("pgstore: mark sent: commit: %w", err)
	}
	return tag.RowsAffected(), nil
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
	last := make(map[int64]int, len(failures))
	for i, f := range failures {
		last[f.Seq] = i
	}
	n := len(last)
	var (
		seqs    = make([]int64, 0, n)
		errs    = make([]string, 0, n)
		delays  = make([]int64, 0, n)
		counts  = make([]bool, 0, n)
		deads   = make([]bool, 0, n)
		visited = make(map[int64]bool, n)
	)
	for i := len(failures) - 1; i >= 0; i-- {
		f := failures[i]
		if visited[f.Seq] {
			continue
		}
		visited[f.Seq] = true
		seqs = append(seqs, f.Seq)
		errs = append(errs, cleanError(f.Error))
		delays = append(delays, max(f.Delay, 0).Milliseconds())
		counts = append(counts, f.CountAttempt)
		deads = append(deads, f.Dead)
	}
	var changed int64
	err := s.pool.QueryRow(ctx, s.q.markFailed, token, seqs, errs, delays, counts, deads).Scan(&changed)
	if err != nil {
		return 0, fmt.Errorf("pgstore: mark failed: %w", err)
	}
	return changed, nil
}

// Release gives the messages back, due at once and without counting an
// attempt (PENDING, or FAILED if they had failed before), if they are still
// IN_FLIGHT under token. It returns how many it changed.
func (s *Store) Release(ctx context.Context, token uuid.UUID, seqs []int64) (int64, error) {
	if len(seqs) == 0 {
		return 0, nil
	}
	tag, err := s.pool.Exec(ctx, s.q.release, seqs, token)
	if err != nil {
		return 0, fmt.Errorf("pgstore: release: %w", err)
	}
	return tag.RowsAffected(), nil
}

// Get returns the message with the event id, whatever its status. It
// returns an error wrapping [ErrNotFound] when there is none.
func (s *Store) Get(ctx context.Context, id uuid.UUID) (outbox.Record, error) {
	rows, err := s.pool.Query(ctx, s.q.get, id)
	if err != nil {
		return outbox.Record{}, fmt.Errorf("pgstore: get %s: %w", id, err)
	}
	rec, err := pgx.CollectExactlyOneRow(rows, scanRecord)
	if errors.Is(err, pgx.ErrNoRows) {
		return outbox.Record{}, fmt.Errorf("pgstore: get %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return outbox.Record{}, fmt.Errorf("pgstore: get %s: %w", id, err)
	}
	return rec, nil
}

// Counts returns the number of messages in each status. Every status is in
// the map, with 0 when no message has it. It reads the whole table.
func (s *Store) Counts(ctx context.Context) (map[outbox.Status]int64, error) {
	counts := map[outbox.Status]int64{
		outbox.StatusPending:    0,
		outbox.StatusInFlight:   0,
		outbox.StatusSent:       0,
		outbox.StatusFailed:     0,
		outbox.StatusDeadLetter: 0,
	}
	rows, err := s.pool.Query(ctx, s.q.counts)
	if err != nil {
		return nil, fmt.Errorf("pgstore: counts: %w", err)
	}
	var (
		status string
		n      int64
	)
	_, err = pgx.ForEachRow(rows, []any{&status, &n}, func() error {
		counts[outbox.Status(status)] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: counts: %w", err)
	}
	return counts, nil
}

// scanRecord scans the columns that claim.sql returns and get.sql selects,
// in that order.
func scanRecord(row pgx.CollectableRow) (outbox.Record, error) {
	var (
		r                                            outbox.Record
		aggregateType, aggregateID, eventType, ctype *string
		eventVersion                                 *int32
		status                                       string
		leaseOwner                                   *string
		leaseExpiresAt, publishedAt                  *time.Time
	)
	err := row.Scan(
		&r.Seq, &r.ID, &aggregateType, &aggregateID, &eventType, &eventVersion,
		&r.Topic, &r.Payload, &ctype, &r.Headers, &r.CorrelationID, &r.CausationID,
		&r.TraceParent, &r.CreatedAt, &status, &r.Attempts, &r.NextAttemptAt, &r.LastError,
		&leaseOwner, &leaseExpiresAt, &publishedAt,
	)
	if err != nil {
		return outbox.Record{}, err
	}
	r.AggregateType = deref(aggregateType)
	r.AggregateID = deref(aggregateID)
	r.EventType = deref(eventType)
	r.ContentType = deref(ctype)
	if eventVersion != nil {
		r.EventVersion = int(*eventVersion)
	}
	r.Status = outbox.Status(status)
	r.LeaseOwner = deref(leaseOwner)
	if leaseExpiresAt != nil {
		r.LeaseExpiresAt = *leaseExpiresAt
	}
	if publishedAt != nil {
		r.PublishedAt = *publishedAt
	}
	if len(r.Headers) == 0 {
		r.Headers = nil
	}
	return r, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// cleanError makes an error text storable and bounded: valid UTF-8 without
// NUL characters (which text columns refuse), at most maxLastErrorBytes
// bytes, cut at a character boundary.
func cleanError(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "")
	if len(s) <= maxLastErrorBytes {
		return s
	}
	cut := maxLastErrorBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

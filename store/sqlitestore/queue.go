package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/errtext"
	"github.com/outbox-dev/outbox/internal/rowheaders"
	"github.com/outbox-dev/outbox/internal/statuscount"
	"github.com/outbox-dev/outbox/store"
)

// MarkSent marks the messages SENT, with PublishedAt the database's now, if
// they are still IN_FLIGHT under token, and returns how many it changed.
func (s *Store) MarkSent(ctx context.Context, token uuid.UUID, seqs []int64) (int64, error) {
	if len(seqs) == 0 {
		return 0, nil
	}
	n, err := s.exec(ctx, s.q.markSent, jsonSeqs(seqs), token.String())
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: mark sent: %w", err)
	}
	return n, nil
}

// failureRow is one element of mark_failed.sql's JSON argument.
type failureRow struct {
	Seq     int64  `json:"seq"`
	Error   string `json:"error"`
	DelayMS int64  `json:"delay_ms"`
	Count   bool   `json:"count"`
	Dead    bool   `json:"dead"`
}

// MarkFailed records failed publishes, if the messages are still IN_FLIGHT
// under token, and returns how many it changed. Each message becomes FAILED
// (or DEAD_LETTER when Dead) with NextAttemptAt = now + Delay (a negative
// Delay counts as zero), LastError = Error (valid UTF-8, cut to 4,000
// bytes), and Attempts one higher when CountAttempt. If a Seq appears
// twice, the last Failure for it wins.
func (s *Store) MarkFailed(ctx context.Context, token uuid.UUID, failures []store.Failure) (int64, error) {
	if len(failures) == 0 {
		return 0, nil
	}
	rows := make([]failureRow, 0, len(failures))
	seen := make(map[int64]bool, len(failures))
	for _, f := range slices.Backward(failures) {
		if seen[f.Seq] {
			continue
		}
		seen[f.Seq] = true
		rows = append(rows, failureRow{
			Seq:     f.Seq,
			Error:   errtext.Clean(f.Error),
			DelayMS: max(f.Delay, 0).Milliseconds(),
			Count:   f.CountAttempt,
			Dead:    f.Dead,
		})
	}
	arg, err := json.Marshal(rows)
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: mark failed: encode failures: %w", err)
	}
	n, err := s.exec(ctx, s.q.markFailed, token.String(), string(arg))
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: mark failed: %w", err)
	}
	return n, nil
}

// Release gives the messages back, due at once and without counting an
// attempt (PENDING, or FAILED if they had failed before), if they are still
// IN_FLIGHT under token. It returns how many it changed.
func (s *Store) Release(ctx context.Context, token uuid.UUID, seqs []int64) (int64, error) {
	if len(seqs) == 0 {
		return 0, nil
	}
	n, err := s.exec(ctx, s.q.release, jsonSeqs(seqs), token.String())
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: release: %w", err)
	}
	return n, nil
}

// Get returns the message with the event id, whatever its status. It
// returns an error wrapping [ErrNotFound] when there is none. A row whose
// headers are not a JSON object of string values (written before migration
// 002) is returned with Invalid set and no Headers, not as an error.
func (s *Store) Get(ctx context.Context, id uuid.UUID) (outbox.Record, error) {
	rows, err := s.db.QueryContext(ctx, s.q.get, id.String())
	if err != nil {
		return outbox.Record{}, fmt.Errorf("sqlitestore: get %s: %w", id, err)
	}
	recs, err := collectRecords(rows)
	if err != nil {
		return outbox.Record{}, fmt.Errorf("sqlitestore: get %s: %w", id, err)
	}
	if len(recs) == 0 {
		return outbox.Record{}, fmt.Errorf("sqlitestore: get %s: %w", id, ErrNotFound)
	}
	return recs[0], nil
}

// Counts returns the number of messages in each status. Every status is in
// the map, with 0 when no message has it. It reads the whole table.
func (s *Store) Counts(ctx context.Context) (map[outbox.Status]int64, error) {
	counts := statuscount.Zero()
	rows, err := s.db.QueryContext(ctx, s.q.counts)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: counts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			status string
			n      int64
		)
		if err := rows.Scan(&status, &n); err != nil {
			return nil, fmt.Errorf("sqlitestore: counts: %w", err)
		}
		counts[outbox.Status(status)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: counts: %w", err)
	}
	return counts, nil
}

// exec runs one autocommit statement and returns the rows it changed.
func (s *Store) exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := s.db.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// jsonSeqs encodes seqs as a JSON array for json_each.
func jsonSeqs(seqs []int64) string {
	b, _ := json.Marshal(seqs) // []int64 always encodes
	return string(b)
}

// collectRecords scans and closes rows of the columns that claim.sql
// returns and get.sql selects, in that order.
func collectRecords(rows *sql.Rows) ([]outbox.Record, error) {
	defer rows.Close()
	var recs []outbox.Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		recs = append(recs, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	return recs, nil
}

func scanRecord(rows *sql.Rows) (outbox.Record, error) {
	var (
		r                           outbox.Record
		id, status, headers         string
		createdAt, nextAttemptAt    int64
		leaseOwner                  sql.NullString
		leaseExpiresAt, publishedAt sql.NullInt64
	)
	err := rows.Scan(
		&r.Seq, &id, &r.AggregateType, &r.AggregateID, &r.EventType, &r.EventVersion,
		&r.Topic, &r.Payload, &r.ContentType, &headers, &r.CorrelationID, &r.CausationID,
		&r.TraceParent, &createdAt, &status, &r.Attempts, &nextAttemptAt, &r.LastError,
		&leaseOwner, &leaseExpiresAt, &publishedAt,
	)
	if err != nil {
		return outbox.Record{}, err
	}
	if r.ID, err = uuid.Parse(id); err != nil {
		return outbox.Record{}, fmt.Errorf("message %d: id %q: %w", r.Seq, id, err)
	}
	// A row whose headers break the rule (written with plain SQL before
	// migration 002) is returned with Invalid set, not as an error: it
	// must not fail the claim or read of the rows beside it.
	r.Headers, r.Invalid = rowheaders.Decode([]byte(headers))
	if r.Payload == nil {
		r.Payload = []byte{}
	}
	r.Status = outbox.Status(status)
	r.CreatedAt = time.UnixMilli(createdAt)
	r.NextAttemptAt = time.UnixMilli(nextAttemptAt)
	r.LeaseOwner = leaseOwner.String
	if leaseExpiresAt.Valid {
		r.LeaseExpiresAt = time.UnixMilli(leaseExpiresAt.Int64)
	}
	if publishedAt.Valid {
		r.PublishedAt = time.UnixMilli(publishedAt.Int64)
	}
	return r, nil
}

package ops

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
)

// Stats is a snapshot of an outbox, cheap enough to read on every
// Prometheus scrape or status page view: each figure comes from a partial
// index or from the few unsent rows, never from a scan of the SENT history
// (unless Config.ExactSentCount).
type Stats struct {
	// At is the database clock when the snapshot was read.
	At time.Time
	// Counts are the messages per status, with every status in
	// [Statuses] present (0 when none). All are exact except SENT, which
	// is PostgreSQL's estimate unless Config.ExactSentCount (see
	// SentEstimated).
	Counts map[outbox.Status]int64
	// SentEstimated is true when Counts[SENT] is an estimate (the row
	// count that autovacuum's last ANALYZE or VACUUM of the partial index
	// outbox_messages_sent recorded).
	SentEstimated bool
	// OldestUnsentAt is when the oldest unsent message (PENDING, FAILED or
	// IN_FLIGHT; the first in seq order) was created. Zero when there is
	// none.
	OldestUnsentAt time.Time
	// OldestUnsentAge is At minus OldestUnsentAt: how far the relay is
	// behind. 0 when nothing is unsent.
	OldestUnsentAge time.Duration
	// BlockedAggregates counts the aggregates whose head is a dead letter
	// with at least one later message waiting behind it: the relay
	// publishes nothing more of them until the dead letter is replayed or
	// discarded.
	BlockedAggregates int64
	// Blocked lists up to Config.Top of them, oldest dead letter first.
	Blocked []BlockedAggregate
	// TopFailing lists up to Config.Top event types with FAILED or
	// DEAD_LETTER messages, most first.
	TopFailing []FailingEventType
	// SentLastMinute counts the messages marked SENT in the minute before
	// At: the relay's recent throughput, across all relays.
	SentLastMinute int64
}

// BlockedAggregate is an aggregate held back by a dead letter.
type BlockedAggregate struct {
	AggregateType, AggregateID string
	// DeadLetterID is the id of the dead letter at its head.
	DeadLetterID uuid.UUID
	// EventType of the dead letter.
	EventType string
	// Waiting counts the later messages of the aggregate that are not
	// SENT (PENDING, FAILED, IN_FLIGHT or DEAD_LETTER).
	Waiting int64
}

// FailingEventType counts the messages of one event type that failed.
type FailingEventType struct {
	EventType string
	// Failed are retrying, DeadLetter gave up.
	Failed, DeadLetter int64
}

// Stats reads a snapshot of the outbox in one round trip.
func (o *Ops) Stats(ctx context.Context) (Stats, error) {
	s := Stats{Counts: make(map[outbox.Status]int64, len(Statuses))}
	for _, st := range Statuses {
		s.Counts[st] = 0
	}
	b := &pgx.Batch{}
	b.Queue(o.q.statsCounts).Query(func(rows pgx.Rows) error {
		var (
			status string
			n      int64
		)
		_, err := pgx.ForEachRow(rows, []any{&status, &n}, func() error {
			s.Counts[outbox.Status(status)] = n
			return nil
		})
		return err
	})
	b.Queue(o.q.statsDiscarded).QueryRow(func(row pgx.Row) error {
		var n int64
		err := row.Scan(&n)
		s.Counts[StatusDiscarded] = n
		return err
	})
	var sentEstimate int64 = -1
	if !o.cfg.ExactSentCount {
		b.Queue(o.q.statsSentEstimate, o.Schema()).QueryRow(func(row pgx.Row) error {
			return row.Scan(&sentEstimate)
		})
	}
	var oldest *time.Time
	b.Queue(o.q.statsHead).QueryRow(func(row pgx.Row) error {
		return row.Scan(&s.At, &oldest, &s.SentLastMinute)
	})
	b.Queue(o.q.statsBlocked, o.cfg.Top).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var a BlockedAggregate
			var aggType, aggID, eventType *string
			if err := rows.Scan(&s.BlockedAggregates, &aggType, &aggID, &a.DeadLetterID, &eventType, &a.Waiting); err != nil {
				return err
			}
			a.AggregateType, a.AggregateID, a.EventType = deref(aggType), deref(aggID), deref(eventType)
			s.Blocked = append(s.Blocked, a)
		}
		return rows.Err()
	})
	b.Queue(o.q.statsFailing, o.cfg.Top).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var f FailingEventType
			var eventType *string
			if err := rows.Scan(&eventType, &f.Failed, &f.DeadLetter); err != nil {
				return err
			}
			f.EventType = deref(eventType)
			s.TopFailing = append(s.TopFailing, f)
		}
		return rows.Err()
	})
	if err := o.pool.SendBatch(ctx, b).Close(); err != nil {
		return Stats{}, fmt.Errorf("ops: stats: %w", err)
	}
	// The estimate is unknown (-1) until the index was first vacuumed or
	// analyzed; count then, as a fresh or small outbox is cheap to count.
	if sentEstimate >= 0 {
		s.Counts[outbox.StatusSent] = sentEstimate
		s.SentEstimated = true
	} else {
		var n int64
		if err := o.pool.QueryRow(ctx, o.q.statsSentExact).Scan(&n); err != nil {
			return Stats{}, fmt.Errorf("ops: stats: count SENT: %w", err)
		}
		s.Counts[outbox.StatusSent] = n
	}
	if oldest != nil {
		s.OldestUnsentAt = *oldest
		s.OldestUnsentAge = max(s.At.Sub(*oldest), 0)
	}
	return s, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

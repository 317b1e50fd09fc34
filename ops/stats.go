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
// index or from the few unsent rows (in cursor mode, a range scan of the
// primary key above the cursor's position), never from a scan of the SENT
// history (unless the table is small, below Config.ExactCountBelow rows, or
// Config.ExactSentCount).
//
// In cursor mode (pgstore's EnableCursor) a message is stored as QUEUED and
// counts as SENT once the cursor's saved position passed it and as PENDING
// before; Cursor has the cursor's state.
type Stats struct {
	// At is the database clock when the snapshot was read.
	At time.Time
	// Counts are the messages per status, with every status in
	// [Statuses] present (0 when none). All are exact except SENT, which
	// is PostgreSQL's estimate when the table holds Config.ExactCountBelow
	// rows or more, unless Config.ExactSentCount (see SentEstimated). PENDING includes the unsent QUEUED messages
	// (Cursor.LagMessages), SENT the QUEUED ones the cursor passed
	// (CursorSent).
	Counts map[outbox.Status]int64
	// SentEstimated is true when Counts[SENT] is an estimate: the row
	// count that autovacuum's last ANALYZE or VACUUM of the partial index
	// outbox_messages_sent recorded, plus CursorSent's estimate.
	SentEstimated bool
	// OldestUnsentAt is when the oldest unsent message (PENDING, FAILED,
	// IN_FLIGHT, or QUEUED above the cursor's position; the first in seq
	// order) was created. Zero when there is none.
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
	// SentLastMinute counts the messages sent in the minute before At, a
	// minute of the relays' throughput: those marked SENT then (claim mode,
	// and the table path in cursor mode), plus CursorSentLastMinute when it
	// is known.
	SentLastMinute int64

	// Cursor is the state of the cursor of cursor mode and its lag;
	// Cursor.Mode is the outbox's relay mode. Cursor.Present is false for
	// an outbox that was never in cursor mode.
	Cursor CursorState
	// CursorSent counts the QUEUED messages at or below the cursor's
	// position: they are SENT, and included in Counts[SENT]. The cursor
	// records no publish time for them, and no index holds them, so the
	// count is derived from PostgreSQL's statistics (the table's row
	// estimate minus the partial indexes', which hold every other status,
	// minus Cursor.LagMessages) unless Config.ExactSentCount, which counts
	// them along the primary key up to the position.
	CursorSent int64
	// CursorSentLastMinute is the cursor's throughput: the QUEUED messages
	// it passed per minute since an earlier Stats of the same Ops, the
	// newest one at least a minute before (and at most five), scaled to
	// one minute. It is included in SentLastMinute. -1 when unknown (the
	// Ops has no such earlier Stats, as in a one-off "outbox stats"); 0
	// without a cursor.
	CursorSentLastMinute int64

	// Topics are the topics the running relays reported in the last
	// minute ([Ops.ReportTopics]): those that cannot take records first,
	// then the others by name. Empty when no relay reports.
	Topics []Topic
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

// Stats reads a snapshot of the outbox in one round trip, then the relay
// mode the outbox records (pgstore.Store.Mode) and the topics the relays
// reported; a last one reads the cursor's lag in cursor mode (with the
// position the first one read, so that it is planned as the range scan it
// is), and counts SENT messages when they must be counted exactly.
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
	var sentEstimate, queuedEstimate, tableRows int64 = -1, -1, 0
	if !o.cfg.ExactSentCount {
		b.Queue(o.q.statsSentEstimate, o.Schema()).QueryRow(func(row pgx.Row) error {
			return row.Scan(&sentEstimate, &tableRows)
		})
		b.Queue(o.q.statsCursorSentEstimate, o.Schema()).QueryRow(func(row pgx.Row) error {
			return row.Scan(&queuedEstimate)
		})
	}
	o.queueCursor(b, &s.Cursor)
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
		return Stats{}, fmt.Errorf("ops: stats: %w", o.dbErr(err))
	}
	if err := o.readMode(ctx, &s.Cursor); err != nil {
		return Stats{}, fmt.Errorf("ops: stats: %w", err)
	}
	topics, err := o.topics(ctx)
	if err != nil {
		return Stats{}, fmt.Errorf("ops: stats: %w", o.dbErr(err))
	}
	s.Topics = topics
	if tableRows < o.cfg.ExactCountBelow {
		// A small table: count rather than estimate.
		sentEstimate, queuedEstimate = -1, -1
	}
	if err := o.sendBatch(ctx, func(b *pgx.Batch) { o.queueStatsMore(b, &s, sentEstimate, queuedEstimate) }); err != nil {
		return Stats{}, fmt.Errorf("ops: stats: %w", o.dbErr(err))
	}
	o.addCursor(&s, queuedEstimate)
	if oldest != nil && (s.OldestUnsentAt.IsZero() || oldest.Before(s.OldestUnsentAt)) {
		s.OldestUnsentAt = *oldest
	}
	if !s.OldestUnsentAt.IsZero() {
		s.OldestUnsentAge = max(s.At.Sub(s.OldestUnsentAt), 0)
	}
	return s, nil
}

// queueStatsMore queues what Stats reads after its first round trip: the
// SENT count when sentEstimate is unknown (-1: the index was never vacuumed
// or analyzed, or the table is small enough to count), and in
// cursor mode the cursor's lag, the messages it passed since an earlier
// Stats (its throughput), and those it passed in all when queuedEstimate
// (the QUEUED rows as the statistics know them) is unknown; addCursor
// completes the figures after the round trip.
func (o *Ops) queueStatsMore(b *pgx.Batch, s *Stats, sentEstimate, queuedEstimate int64) {
	if sentEstimate >= 0 {
		s.Counts[outbox.StatusSent] = sentEstimate
		s.SentEstimated = true
	} else {
		b.Queue(o.q.statsSentExact).QueryRow(func(row pgx.Row) error {
			var n int64
			err := row.Scan(&n)
			s.Counts[outbox.StatusSent] += n
			return err
		})
	}
	c := &s.Cursor
	if !c.Present {
		return
	}
	o.queueCursorLag(b, c)
	if queuedEstimate < 0 {
		b.Queue(o.q.statsCursorSentExact, c.Position).QueryRow(func(row pgx.Row) error {
			err := row.Scan(&s.CursorSent)
			s.Counts[outbox.StatusSent] += s.CursorSent
			return err
		})
	}
	s.CursorSentLastMinute = -1
	if base, ok := o.cursorSamples.base(time.Now()); ok {
		b.Queue(o.q.statsCursorPassed, base.position, c.Position).QueryRow(func(row pgx.Row) error {
			var passed int64
			err := row.Scan(&passed)
			s.CursorSentLastMinute = perMinute(passed, c.At.Sub(base.at))
			s.SentLastMinute += s.CursorSentLastMinute
			return err
		})
	}
}

// addCursor adds the cursor's lag (read by queueStatsMore) to the unsent
// figures of s, and the messages it passed to SENT by the statistics'
// queuedEstimate, unless that was unknown (-1) and they were counted. It
// records where the cursor is for a later Stats.
func (o *Ops) addCursor(s *Stats, queuedEstimate int64) {
	c := s.Cursor
	if !c.Present {
		return
	}
	s.Counts[outbox.StatusPending] += c.LagMessages
	s.OldestUnsentAt = c.OldestUnsentAt
	if queuedEstimate >= 0 {
		s.CursorSent = max(queuedEstimate-c.LagMessages, 0)
		s.Counts[outbox.StatusSent] += s.CursorSent
		s.SentEstimated = true
	}
	o.cursorSamples.add(cursorSample{at: c.At, local: time.Now(), position: c.Position})
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

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
// Each message counts in its state as pgstore's outbox_message_states
// (migration 016) defines it: in cursor mode (pgstore's EnableCursor) a
// message is SENT once the cursor's saved position passed it and PENDING
// before, and a message a relay leased is IN_FLIGHT. Cursor has the
// cursor's state.
type Stats struct {
	// At is the database clock when the snapshot was read.
	At time.Time
	// Counts are the messages per state, with every state in [Statuses]
	// present (0 when none). All are exact except SENT, which is
	// PostgreSQL's estimate when the table holds Config.ExactCountBelow
	// rows or more, unless Config.ExactSentCount (see SentEstimated).
	// PENDING includes the unsent messages of cursor mode
	// (Cursor.LagMessages), SENT those the cursor passed (CursorSent).
	// IN_FLIGHT includes a message whose lease expired until a relay
	// claims it again: its relay may still mark it until then.
	Counts map[outbox.Status]int64
	// SentEstimated is true when Counts[SENT] is an estimate: the row
	// count that autovacuum's last ANALYZE or VACUUM of the partial index
	// outbox_messages_sent recorded, plus CursorSent's estimate.
	SentEstimated bool
	// OldestUnsentAt is when the oldest unsent message (PENDING, FAILED or
	// IN_FLIGHT, those of cursor mode included; the first in seq order)
	// was created. Zero when there is none.
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
	// CursorSent counts the messages of cursor mode at or below the
	// cursor's position: they are SENT, and included in Counts[SENT]. The
	// cursor records no publish time for them, and no index holds them, so
	// the count is derived from PostgreSQL's statistics (the table's row
	// estimate minus the partial indexes', which hold every other message,
	// minus Cursor.LagMessages) unless Config.ExactSentCount, which counts
	// them along the primary key up to the position.
	CursorSent int64
	// CursorSentLastMinute is the cursor's throughput: the messages it
	// passed per minute since an earlier Stats of the same Ops, the
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
// reported, and a last round trip for what depends on the first: the SENT
// counts when they must be counted exactly, and in cursor mode the
// messages the cursor passed since an earlier Stats (it needs the position
// the first one read).
func (o *Ops) Stats(ctx context.Context) (Stats, error) {
	s := Stats{Counts: make(map[outbox.Status]int64, len(Statuses))}
	for _, st := range Statuses {
		s.Counts[st] = 0
	}
	est := sentEstimates{sent: -1, cursor: -1}
	var oldest unsentHeads
	if err := o.sendBatch(ctx, func(b *pgx.Batch) { o.queueStats(b, &s, &est, &oldest) }); err != nil {
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
	if est.tableRows < o.cfg.ExactCountBelow {
		// A small table: count rather than estimate.
		est.sent, est.cursor = -1, -1
	}
	if err := o.sendBatch(ctx, func(b *pgx.Batch) { o.queueStatsMore(b, &s, est) }); err != nil {
		return Stats{}, fmt.Errorf("ops: stats: %w", o.dbErr(err))
	}
	o.addCursor(&s, est.cursor)
	oldest.apply(&s)
	return s, nil
}

// sentEstimates are the SENT counts as PostgreSQL's statistics know them:
// those claims marked (stats_sent_estimate.sql) and the messages of cursor
// mode (stats_cursor_sent_estimate.sql, the lag included), -1 when unknown;
// and the table's rows, to decide whether counting is cheap.
type sentEstimates struct {
	sent, cursor, tableRows int64
}

// unsentHeads are when the oldest unsent message a claim publishes and the
// oldest of cursor mode were created (stats_head.sql); nil when there is
// none.
type unsentHeads struct {
	table, cursor *time.Time
}

// apply sets s.OldestUnsentAt and OldestUnsentAge from the older of h, and
// s.Cursor's OldestUnsentAt and LagAge from h.cursor.
func (h unsentHeads) apply(s *Stats) {
	if h.cursor != nil {
		s.Cursor.OldestUnsentAt = *h.cursor
		s.Cursor.LagAge = max(s.Cursor.At.Sub(*h.cursor), 0)
		s.OldestUnsentAt = *h.cursor
	}
	if h.table != nil && (s.OldestUnsentAt.IsZero() || h.table.Before(s.OldestUnsentAt)) {
		s.OldestUnsentAt = *h.table
	}
	if !s.OldestUnsentAt.IsZero() {
		s.OldestUnsentAge = max(s.At.Sub(s.OldestUnsentAt), 0)
	}
}

// queueStats queues what Stats reads in its first round trip: the counts
// by state (with the cursor's lag), the estimates (unless
// Config.ExactSentCount), the cursor, the clock and the oldest unsent
// messages, the blocked aggregates and the failing event types.
func (o *Ops) queueStats(b *pgx.Batch, s *Stats, est *sentEstimates, oldest *unsentHeads) {
	b.Queue(o.q.statsCounts).Query(func(rows pgx.Rows) error {
		var (
			state    string
			byCursor bool
			n        int64
		)
		_, err := pgx.ForEachRow(rows, []any{&state, &byCursor, &n}, func() error {
			s.Counts[outbox.Status(state)] += n
			if byCursor && outbox.Status(state) == outbox.StatusPending {
				s.Cursor.LagMessages = n
			}
			return nil
		})
		return err
	})
	if !o.cfg.ExactSentCount {
		b.Queue(o.q.statsSentEstimate, o.Schema()).QueryRow(func(row pgx.Row) error {
			return row.Scan(&est.sent, &est.tableRows)
		})
		b.Queue(o.q.statsCursorSentEstimate, o.Schema()).QueryRow(func(row pgx.Row) error {
			return row.Scan(&est.cursor)
		})
	}
	o.queueCursor(b, &s.Cursor)
	b.Queue(o.q.statsHead).QueryRow(func(row pgx.Row) error {
		return row.Scan(&s.At, &oldest.table, &oldest.cursor, &s.SentLastMinute)
	})
	o.queueBlocked(b, s)
	o.queueFailing(b, s)
}

// queueBlocked queues stats_blocked.sql, which fills s.BlockedAggregates
// and s.Blocked.
func (o *Ops) queueBlocked(b *pgx.Batch, s *Stats) {
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
}

// queueFailing queues stats_failing.sql, which fills s.TopFailing.
func (o *Ops) queueFailing(b *pgx.Batch, s *Stats) {
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
}

// queueStatsMore queues what Stats reads after its first round trip: the
// SENT count when est.sent is unknown (-1: the index was never vacuumed or
// analyzed, or the table is small enough to count), and in cursor mode the
// messages it passed since an earlier Stats (its throughput) and those it
// passed in all when est.cursor is unknown; addCursor completes the
// figures after the round trip.
func (o *Ops) queueStatsMore(b *pgx.Batch, s *Stats, est sentEstimates) {
	if est.sent >= 0 {
		s.Counts[outbox.StatusSent] = est.sent
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
	if est.cursor < 0 {
		b.Queue(o.q.statsCursorSentExact).QueryRow(func(row pgx.Row) error {
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

// addCursor adds the messages the cursor passed to SENT by the statistics'
// cursorEstimate (the messages of cursor mode, less the lag), unless that
// was unknown (-1) and they were counted. It records where the cursor is
// for a later Stats.
func (o *Ops) addCursor(s *Stats, cursorEstimate int64) {
	c := s.Cursor
	if !c.Present {
		return
	}
	if cursorEstimate >= 0 {
		s.CursorSent = max(cursorEstimate-c.LagMessages, 0)
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

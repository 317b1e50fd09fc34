package ops

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Filter selects dead letters. The fields combine with AND; empty fields
// match everything.
type Filter struct {
	AggregateType string `json:"aggregateType,omitempty"`
	AggregateID   string `json:"aggregateId,omitempty"`
	EventType     string `json:"eventType,omitempty"`
	// ErrorClass keeps the dead letters of one cause, as
	// [DeadLetterGroup].ErrorClass names it.
	ErrorClass string `json:"errorClass,omitempty"`
	// Topic keeps the dead letters with this topic of their own (not one
	// the relay's routes chose).
	Topic string `json:"topic,omitempty"`
	// Group keeps the dead letters of one group, by [DeadLetterGroup].Key:
	// 16 lower-case hex digits ([ValidGroupKey]); another value is refused
	// with an error wrapping [ErrInvalidConfig].
	Group string `json:"group,omitempty"`
	// Since keeps the messages that became dead letters at or after it.
	Since time.Time `json:"since,omitzero"`
	// AfterSeq keeps the messages with a higher Seq, for paging through a
	// long list.
	AfterSeq int64 `json:"afterSeq,omitempty"`
	// Limit is the most messages selected, lowest Seq first. 0 means no
	// limit.
	Limit int `json:"limit,omitempty"`
	// All must be set for [Ops.Replay] to select every dead letter when no
	// other field narrows the selection, so that an empty filter never
	// replays everything by accident. [Ops.DeadLetters] ignores it.
	All bool `json:"all,omitempty"`
}

// narrows reports whether f selects by anything but paging.
func (f Filter) narrows() bool {
	return f.AggregateType != "" || f.AggregateID != "" || f.EventType != "" || !f.Since.IsZero() ||
		f.ErrorClass != "" || f.Topic != "" || f.Group != ""
}

// DeadLetter is one message in DEAD_LETTER, as listed.
type DeadLetter struct {
	Seq                        int64
	ID                         uuid.UUID
	AggregateType, AggregateID string
	EventType                  string
	Topic                      string
	CreatedAt                  time.Time
	// DeadAt is when the message became a dead letter.
	DeadAt time.Time
	// Attempts is the number of failed attempts.
	Attempts  int
	LastError string
	// ErrorClass and Group are its cause and its group's key, as in
	// [DeadLetterGroup].
	ErrorClass, Group string
	// Waiting counts the later messages of its aggregate that are not
	// SENT; non-zero means the dead letter blocks them.
	Waiting int64
}

// DeadLetters lists the dead letters that f selects, in Seq order.
func (o *Ops) DeadLetters(ctx context.Context, f Filter) ([]DeadLetter, error) {
	if err := f.validate(); err != nil {
		return nil, fmt.Errorf("ops: list dead letters: %w", err)
	}
	out, err := o.deadLetters(ctx, o.pool, f, 0)
	if err != nil {
		return nil, fmt.Errorf("ops: list dead letters: %w", o.dbErr(err))
	}
	return out, nil
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// deadLetters lists the dead letters f selects with seq at most maxSeq (0:
// any).
func (o *Ops) deadLetters(ctx context.Context, db querier, f Filter, maxSeq int64) ([]DeadLetter, error) {
	rows, err := db.Query(ctx, o.q.dlqList, f.args(maxSeq)...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (DeadLetter, error) {
		var d DeadLetter
		var aggType, aggID, eventType *string
		err := row.Scan(&d.Seq, &d.ID, &aggType, &aggID, &eventType, &d.Topic, &d.CreatedAt,
			&d.DeadAt, &d.Attempts, &d.LastError, &d.ErrorClass, &d.Group, &d.Waiting)
		d.AggregateType, d.AggregateID, d.EventType = deref(aggType), deref(aggID), deref(eventType)
		return d, err
	})
}

// sinceOrMin maps "no bound" to a time before any message.
func sinceOrMin(t time.Time) time.Time {
	if t.IsZero() {
		return time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	return t
}

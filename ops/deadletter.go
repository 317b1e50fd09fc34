package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// Attempt is one failed publish attempt of a message.
type Attempt struct {
	// Number is the message's attempt count after this failure.
	Number int
	Error  string
	// Dead is true for the failure that made the message a dead letter.
	Dead bool
	At   time.Time
}

// AuditEntry is one recorded operation.
type AuditEntry struct {
	ID int64
	At time.Time
	// Actor is who ran it, such as "alice@ops-box".
	Actor string
	// Action is replay, discard, republish or cleanup.
	Action string
	Reason string
	// MessageIDs are the messages changed (replay, discard).
	MessageIDs []uuid.UUID
	// Filter is the selection as given, as JSON (filter, cursor, cutoff).
	Filter json.RawMessage
	// Count is how many messages it changed, published or deleted.
	Count int64
}

// The actions in the audit log.
const (
	ActionReplay    = "replay"
	ActionDiscard   = "discard"
	ActionRepublish = "republish"
	ActionCleanup   = "cleanup"
)

// DeadLetterDetail is everything known about one message, for
// "outbox dlq show".
type DeadLetterDetail struct {
	// Record is the message with payload, headers and relay state.
	Record outbox.Record
	// DiscardedAt is when it was discarded; zero unless DISCARDED.
	DiscardedAt time.Time
	// Attempts are its failed attempts, oldest first.
	Attempts []Attempt
	// Audit are the operations that named it, newest first.
	Audit []AuditEntry
	// Waiting counts the later messages of its aggregate that are not
	// SENT.
	Waiting int64
	// RawHeaders is the headers column as stored (JSON), set only when
	// Record.Invalid says it could not be read as headers (a row written
	// with plain SQL before migration 015), so that an operator sees what
	// to correct. Record.Headers is then nil.
	RawHeaders json.RawMessage
}

// DeadLetter returns the message with the event id, whatever its state,
// with its attempt history and the audit entries that name it. The error
// wraps [ErrNotFound] when there is no such message.
func (o *Ops) DeadLetter(ctx context.Context, id uuid.UUID) (DeadLetterDetail, error) {
	rec, err := o.store.Get(ctx, id)
	if errors.Is(err, pgstore.ErrNotFound) {
		return DeadLetterDetail{}, fmt.Errorf("ops: show %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return DeadLetterDetail{}, fmt.Errorf("ops: show %s: %w", id, o.dbErr(err))
	}
	d := DeadLetterDetail{Record: rec}
	b := &pgx.Batch{}
	b.Queue(o.q.dlqAttempts, rec.Seq).Query(func(rows pgx.Rows) error {
		var err error
		d.Attempts, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Attempt, error) {
			var a Attempt
			err := row.Scan(&a.Number, &a.Error, &a.Dead, &a.At)
			return a, err
		})
		return err
	})
	b.Queue(o.q.dlqExtra, rec.Seq).QueryRow(func(row pgx.Row) error {
		var (
			discardedAt *time.Time
			headers     string
		)
		if err := row.Scan(&discardedAt, &headers, &d.Waiting); err != nil {
			return err
		}
		d.DiscardedAt = deref(discardedAt)
		if rec.Invalid != nil {
			d.RawHeaders = json.RawMessage(headers)
		}
		return nil
	})
	b.Queue(o.q.auditForMessage, id, auditShowLimit).Query(func(rows pgx.Rows) error {
		var err error
		d.Audit, err = pgx.CollectRows(rows, scanAudit)
		return err
	})
	if err := o.pool.SendBatch(ctx, b).Close(); err != nil {
		return DeadLetterDetail{}, fmt.Errorf("ops: show %s: %w", id, o.dbErr(err))
	}
	return d, nil
}

// DeadLetterBySeq is [Ops.DeadLetter] for the message with seq, the
// number "outbox dlq list" prints first. The error wraps [ErrNotFound]
// when there is no such message.
func (o *Ops) DeadLetterBySeq(ctx context.Context, seq int64) (DeadLetterDetail, error) {
	var id uuid.UUID
	err := o.pool.QueryRow(ctx, o.q.dlqSeq, seq).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return DeadLetterDetail{}, fmt.Errorf("ops: show seq %d: %w", seq, ErrNotFound)
	}
	if err != nil {
		return DeadLetterDetail{}, fmt.Errorf("ops: show seq %d: %w", seq, o.dbErr(err))
	}
	return o.DeadLetter(ctx, id)
}

// auditShowLimit bounds the audit entries DeadLetter returns.
const auditShowLimit = 100

// Audit returns the newest audit entries, at most limit (100 when limit is
// 0 or less), newest first.
func (o *Ops) Audit(ctx context.Context, limit int) ([]AuditEntry, error) {
	if limit <= 0 {
		limit = auditShowLimit
	}
	rows, err := o.pool.Query(ctx, o.q.auditForMessage, nil, limit)
	if err != nil {
		return nil, fmt.Errorf("ops: audit: %w", o.dbErr(err))
	}
	entries, err := pgx.CollectRows(rows, scanAudit)
	if err != nil {
		return nil, fmt.Errorf("ops: audit: %w", o.dbErr(err))
	}
	return entries, nil
}

func scanAudit(row pgx.CollectableRow) (AuditEntry, error) {
	var e AuditEntry
	var filter []byte
	err := row.Scan(&e.ID, &e.At, &e.Actor, &e.Action, &e.Reason, &e.MessageIDs, &filter, &e.Count)
	if len(filter) > 0 {
		e.Filter = json.RawMessage(filter)
	}
	return e, err
}

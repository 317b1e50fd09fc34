package ops

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// Filter selects dead letters. The fields combine with AND; empty fields
// match everything.
type Filter struct {
	AggregateType string `json:"aggregateType,omitempty"`
	AggregateID   string `json:"aggregateId,omitempty"`
	EventType     string `json:"eventType,omitempty"`
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
	return f.AggregateType != "" || f.AggregateID != "" || f.EventType != "" || !f.Since.IsZero()
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
	// Waiting counts the later messages of its aggregate that are not
	// SENT; non-zero means the dead letter blocks them.
	Waiting int64
}

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
	// with plain SQL before migration 014), so that an operator sees what
	// to correct. Record.Headers is then nil.
	RawHeaders json.RawMessage
}

// DeadLetters lists the dead letters that f selects, in Seq order.
func (o *Ops) DeadLetters(ctx context.Context, f Filter) ([]DeadLetter, error) {
	out, err := o.deadLetters(ctx, o.pool, f)
	if err != nil {
		return nil, fmt.Errorf("ops: list dead letters: %w", err)
	}
	return out, nil
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func (o *Ops) deadLetters(ctx context.Context, db querier, f Filter) ([]DeadLetter, error) {
	var limit *int64
	if f.Limit > 0 {
		l := int64(f.Limit)
		limit = &l
	}
	rows, err := db.Query(ctx, o.q.dlqList, f.AggregateType, f.AggregateID, f.EventType,
		sinceOrMin(f.Since), f.AfterSeq, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (DeadLetter, error) {
		var d DeadLetter
		var aggType, aggID, eventType *string
		err := row.Scan(&d.Seq, &d.ID, &aggType, &aggID, &eventType, &d.Topic, &d.CreatedAt,
			&d.DeadAt, &d.Attempts, &d.LastError, &d.Waiting)
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

// DeadLetter returns the message with the event id, whatever its status,
// with its attempt history and the audit entries that name it. The error
// wraps [ErrNotFound] when there is no such message.
func (o *Ops) DeadLetter(ctx context.Context, id uuid.UUID) (DeadLetterDetail, error) {
	rec, err := o.store.Get(ctx, id)
	if errors.Is(err, pgstore.ErrNotFound) {
		return DeadLetterDetail{}, fmt.Errorf("ops: show %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return DeadLetterDetail{}, fmt.Errorf("ops: show %s: %w", id, err)
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
		return DeadLetterDetail{}, fmt.Errorf("ops: show %s: %w", id, err)
	}
	return d, nil
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
		return nil, fmt.Errorf("ops: audit: %w", err)
	}
	entries, err := pgx.CollectRows(rows, scanAudit)
	if err != nil {
		return nil, fmt.Errorf("ops: audit: %w", err)
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

// Request says which dead letters an operation changes, who asks and why.
type Request struct {
	// Actor is recorded in the audit log. Defaults to [DefaultActor].
	Actor string
	// Reason is recorded in the audit log. Required by [Ops.Discard];
	// defaults to empty for [Ops.Replay].
	Reason string
	// IDs are the messages, by event id. Every one must be a dead letter,
	// or nothing is changed.
	IDs []uuid.UUID
	// Filter selects the messages when IDs is empty ([Ops.Replay] only):
	// those that are dead letters when the operation runs.
	Filter *Filter
}

// Result is what an operation changed.
type Result struct {
	// AuditID is the id of its audit entry.
	AuditID int64
	// At is when it was committed, by the database clock.
	At time.Time
	// IDs are the messages changed, in Seq order.
	IDs []uuid.UUID
}

// Replay gives dead letters another chance: each goes back to PENDING with
// its attempts reset to 0, due at once, which unblocks its aggregate; the
// relay then publishes it, and the messages of its aggregate behind it, in
// order (within its poll interval). The change and its audit entry commit
// in one transaction.
//
// With IDs, every id must be a dead letter: otherwise nothing changes and
// the error wraps [ErrNotFound] or [ErrNotDeadLetter] and names the ids.
// With a Filter, the dead letters it selects are replayed (possibly none).
func (o *Ops) Replay(ctx context.Context, req Request) (Result, error) {
	return o.change(ctx, ActionReplay, o.q.replay, req)
}

// Discard gives up on dead letters: each becomes DISCARDED, which is
// terminal and kept (until retention removes it, see
// CleanupConfig.IncludeDiscarded), and unblocks its aggregate: the relay
// publishes the messages behind it. Reason is required. Every id must be a
// dead letter: otherwise nothing changes and the error wraps [ErrNotFound]
// or [ErrNotDeadLetter]. The change and its audit entry commit in one
// transaction.
func (o *Ops) Discard(ctx context.Context, req Request) (Result, error) {
	if strings.TrimSpace(req.Reason) == "" {
		return Result{}, fmt.Errorf("ops: discard: %w", ErrReasonRequired)
	}
	if len(req.IDs) == 0 {
		return Result{}, fmt.Errorf("ops: discard: %w: give the ids of the dead letters", ErrEmptySelection)
	}
	req.Filter = nil
	return o.change(ctx, ActionDiscard, o.q.discard, req)
}

// change runs replay.sql or discard.sql on the selected dead letters and
// records the audit entry, in one transaction.
func (o *Ops) change(ctx context.Context, action, sql string, req Request) (Result, error) {
	req.Actor = actorOr(req.Actor)
	var filterJSON []byte
	switch {
	case len(req.IDs) > 0:
	case req.Filter != nil && (req.Filter.narrows() || req.Filter.All):
		var err error
		if filterJSON, err = json.Marshal(req.Filter); err != nil {
			return Result{}, fmt.Errorf("ops: %s: %w", action, err)
		}
	case req.Filter != nil:
		return Result{}, fmt.Errorf("ops: %s: %w: the filter narrows nothing; set Filter.All to select every dead letter", action, ErrEmptySelection)
	default:
		return Result{}, fmt.Errorf("ops: %s: %w", action, ErrEmptySelection)
	}

	var res Result
	err := pgx.BeginFunc(ctx, o.pool, func(tx pgx.Tx) error {
		var seqs []int64
		if len(req.IDs) > 0 {
			var err error
			if seqs, err = o.deadLetterSeqs(ctx, tx, req.IDs); err != nil {
				return err
			}
		} else {
			list, err := o.deadLetters(ctx, tx, *req.Filter)
			if err != nil {
				return err
			}
			for _, d := range list {
				seqs = append(seqs, d.Seq)
			}
		}
		type changed struct {
			Seq int64
			ID  uuid.UUID
		}
		rows, err := tx.Query(ctx, sql, seqs)
		if err != nil {
			return err
		}
		done, err := pgx.CollectRows(rows, pgx.RowToStructByPos[changed])
		if err != nil {
			return err
		}
		if len(req.IDs) > 0 && len(done) != len(seqs) {
			// Changed by someone else between the check and the update.
			return fmt.Errorf("%w: %d of the %d messages changed status meanwhile; nothing was changed",
				ErrNotDeadLetter, len(seqs)-len(done), len(seqs))
		}
		slices.SortFunc(done, func(a, b changed) int { return cmp.Compare(a.Seq, b.Seq) })
		res.IDs = make([]uuid.UUID, len(done))
		for i, c := range done {
			res.IDs[i] = c.ID
		}
		return tx.QueryRow(ctx, o.q.auditInsert, req.Actor, action, req.Reason, uuidArray(res.IDs), jsonArg(filterJSON), int64(len(done))).
			Scan(&res.AuditID, &res.At)
	})
	if err != nil {
		return Result{}, fmt.Errorf("ops: %s: %w", action, err)
	}
	o.log.Info("dead letters "+action+"ed", slog.String("actor", req.Actor), slog.String("reason", req.Reason),
		slog.Int("messages", len(res.IDs)), slog.Int64("audit_id", res.AuditID), slog.Any("message_ids", res.IDs))
	return res, nil
}

// deadLetterSeqs returns the seqs of ids, which must all be dead letters.
func (o *Ops) deadLetterSeqs(ctx context.Context, tx pgx.Tx, ids []uuid.UUID) ([]int64, error) {
	ids = slices.Clone(ids)
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) })
	ids = slices.Compact(ids)
	rows, err := tx.Query(ctx, o.q.selectByIDs, uuidArray(ids))
	if err != nil {
		return nil, err
	}
	type found struct {
		ID     uuid.UUID
		Seq    int64
		Status string
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[found])
	if err != nil {
		return nil, err
	}
	byID := make(map[uuid.UUID]found, len(got))
	for _, f := range got {
		byID[f.ID] = f
	}
	var missing, notDead []string
	var seqs []int64
	for _, id := range ids {
		f, ok := byID[id]
		switch {
		case !ok:
			missing = append(missing, id.String())
		case outbox.Status(f.Status) != outbox.StatusDeadLetter:
			notDead = append(notDead, fmt.Sprintf("%s (%s)", id, f.Status))
		default:
			seqs = append(seqs, f.Seq)
		}
	}
	switch {
	case len(missing) > 0:
		return nil, fmt.Errorf("%w: %s; nothing was changed", ErrNotFound, strings.Join(missing, ", "))
	case len(notDead) > 0:
		return nil, fmt.Errorf("%w: %s; nothing was changed", ErrNotDeadLetter, strings.Join(notDead, ", "))
	}
	slices.Sort(seqs)
	return seqs, nil
}

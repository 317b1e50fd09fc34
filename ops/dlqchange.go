package ops

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
)

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
	// Filter selects the messages when IDs is empty: those that are dead
	// letters when the operation reaches them, up to the newest message
	// when it starts. For [Ops.Discard] it must narrow the selection
	// (Filter.All is not enough).
	Filter *Filter
	// BatchSize is the most messages a change by Filter makes in one
	// transaction. Each batch commits with its own audit entry, so that a
	// large group holds no long transaction, and what was done stays done
	// if the operation stops. Defaults to [DefaultDeadLetterBatchSize].
	BatchSize int
	// Rate bounds, on average, how many messages per second a change
	// by Filter makes, so that replaying or discarding a large group loads
	// neither the database nor the relay (which publishes what was
	// replayed) all at once. Defaults to [DefaultDeadLetterRate]; a negative
	// value sets no bound.
	Rate float64
	// OnBatch, if set, is called after each batch of a change by Filter
	// committed, with what that batch changed.
	OnBatch func(Result)
}

// Defaults of Request.
const (
	DefaultDeadLetterBatchSize = 500
	DefaultDeadLetterRate      = 1000
)

func (r Request) withDefaults() Request {
	r.Actor = actorOr(r.Actor)
	if r.BatchSize == 0 {
		r.BatchSize = DefaultDeadLetterBatchSize
	}
	if r.Rate == 0 {
		r.Rate = DefaultDeadLetterRate
	}
	return r
}

// Result is what an operation changed.
type Result struct {
	// AuditID is the id of its audit entry: the first one, when it
	// committed several batches.
	AuditID int64
	// AuditIDs are the ids of its audit entries, one per transaction, in
	// order.
	AuditIDs []int64
	// At is when it (its last batch) was committed, by the database clock.
	At time.Time
	// IDs are the messages changed, in Seq order.
	IDs []uuid.UUID
}

// add appends batch b to r.
func (r *Result) add(b Result) {
	if r.AuditID == 0 {
		r.AuditID = b.AuditID
	}
	r.AuditIDs = append(r.AuditIDs, b.AuditIDs...)
	r.At = b.At
	r.IDs = append(r.IDs, b.IDs...)
}

// Replay gives dead letters another chance: each goes back to PENDING with
// its attempts reset to 0, due at once, which unblocks its aggregate; the
// relay then publishes it, and the messages of its aggregate behind it, in
// order (within its poll interval).
//
// With IDs, every id must be a dead letter: otherwise nothing changes and
// the error wraps [ErrNotFound] or [ErrNotDeadLetter] and names the ids.
// The change and its audit entry commit in one transaction.
//
// With a Filter (a group: Filter.Group), the dead letters it selects are
// replayed, possibly none, in seq order, in batches of Request.BatchSize
// that each commit with their audit entry, at most Request.Rate
// messages per second. The selection reads every dead letter once, when
// it starts, for the batches' ranges of seqs; each batch then reads its
// range only. Per-aggregate order holds across batches: the relay
// publishes only the first unsent message of an aggregate, so the messages
// behind a replayed one wait until it is sent, and a replayed one behind a
// dead letter not (yet) replayed waits for that one. If a batch fails or
// ctx ends, the batches committed stay: the Result returned with the error
// says what they changed.
func (o *Ops) Replay(ctx context.Context, req Request) (Result, error) {
	return o.change(ctx, ActionReplay, o.q.replay, req)
}

// Discard gives up on dead letters: each becomes DISCARDED, which is
// terminal and kept (until retention removes it, see
// CleanupConfig.IncludeDiscarded), and unblocks its aggregate: the relay
// publishes the messages behind it. Reason is required. With IDs, every id
// must be a dead letter: otherwise nothing changes and the error wraps
// [ErrNotFound] or [ErrNotDeadLetter]; the change and its audit entry
// commit in one transaction. A Filter must narrow the selection (a group,
// an event type, ...); its dead letters are discarded in batches as by
// [Ops.Replay].
func (o *Ops) Discard(ctx context.Context, req Request) (Result, error) {
	if strings.TrimSpace(req.Reason) == "" {
		return Result{}, fmt.Errorf("ops: discard: %w", ErrReasonRequired)
	}
	if len(req.IDs) == 0 && (req.Filter == nil || !req.Filter.narrows()) {
		return Result{}, fmt.Errorf("ops: discard: %w: give the ids of the dead letters, or a filter such as a group", ErrEmptySelection)
	}
	return o.change(ctx, ActionDiscard, o.q.discard, req)
}

// change runs replay.sql or discard.sql on the dead letters req selects,
// with the audit entries.
func (o *Ops) change(ctx context.Context, action, sql string, req Request) (Result, error) {
	req = req.withDefaults()
	var (
		res Result
		err error
	)
	if req.Filter != nil {
		if err := req.Filter.validate(); err != nil {
			return Result{}, fmt.Errorf("ops: %s: %w", action, err)
		}
	}
	switch {
	case req.BatchSize < 1:
		return Result{}, fmt.Errorf("ops: %s: %w: BatchSize %d must be at least 1", action, ErrInvalidConfig, req.BatchSize)
	case len(req.IDs) > 0:
		res, err = o.changeIDs(ctx, action, sql, req)
	case req.Filter != nil && (req.Filter.narrows() || req.Filter.All):
		res, err = o.changeFiltered(ctx, action, sql, req)
	case req.Filter != nil:
		return Result{}, fmt.Errorf("ops: %s: %w: the filter narrows nothing; set Filter.All to select every dead letter", action, ErrEmptySelection)
	default:
		return Result{}, fmt.Errorf("ops: %s: %w", action, ErrEmptySelection)
	}
	attrs := []any{slog.String("actor", req.Actor), slog.String("reason", req.Reason),
		slog.Int("messages", len(res.IDs)), slog.Any("audit_ids", res.AuditIDs)}
	if req.Filter != nil && len(req.IDs) == 0 {
		filter, _ := json.Marshal(req.Filter)
		attrs = append(attrs, slog.String("filter", string(filter)))
	} else {
		attrs = append(attrs, slog.Any("message_ids", res.IDs))
	}
	if err != nil {
		err = o.dbErr(err)
		if len(res.IDs) > 0 {
			o.log.Warn("dead letters "+action+"ed in part", append(attrs, slog.Any("error", err))...)
		}
		return res, fmt.Errorf("ops: %s: %w", action, err)
	}
	o.log.Info("dead letters "+action+"ed", attrs...)
	return res, nil
}

// changeIDs changes the dead letters named by req.IDs, all or none, in one
// transaction with its audit entry.
func (o *Ops) changeIDs(ctx context.Context, action, sql string, req Request) (Result, error) {
	var res Result
	err := pgx.BeginFunc(ctx, o.pool, func(tx pgx.Tx) error {
		seqs, err := o.deadLetterSeqs(ctx, tx, req.IDs)
		if err != nil {
			return err
		}
		if res, err = o.apply(ctx, tx, action, sql, seqs, req, nil); err != nil {
			return err
		}
		if len(res.IDs) != len(seqs) {
			// Changed by someone else between the check and the update.
			return fmt.Errorf("%w: %d of the %d messages changed status meanwhile; nothing was changed",
				ErrNotDeadLetter, len(seqs)-len(res.IDs), len(seqs))
		}
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	return res, nil
}

// changeFiltered changes the dead letters req.Filter selects when it
// starts (up to the newest message then), in batches of req.BatchSize in
// seq order, each in a transaction with its audit entry, paced to
// req.Rate. It classifies the dead letters once, for the batches' bounds
// (batchBounds); each batch selects again only within its range of seqs.
// It returns what the committed batches changed, also with an error.
func (o *Ops) changeFiltered(ctx context.Context, action, sql string, req Request) (Result, error) {
	filterJSON, err := json.Marshal(req.Filter)
	if err != nil {
		return Result{}, err
	}
	bounds, err := o.batchBounds(ctx, *req.Filter, req.BatchSize)
	if err != nil {
		return Result{}, err
	}
	f := *req.Filter
	remaining := f.Limit // 0: no limit
	var pace *pacer
	if req.Rate > 0 {
		pace = newPacer(req.Rate)
	}
	var res Result
	for i, first := 0, true; i < len(bounds); first = false {
		f.Limit = req.BatchSize
		if remaining > 0 {
			f.Limit = min(f.Limit, remaining)
		}
		if pace != nil {
			if err := pace.wait(ctx, f.Limit); err != nil {
				return res, fmt.Errorf("stopped after %d message(s): %w", len(res.IDs), err)
			}
		}
		b, last, n, err := o.changeBatch(ctx, action, sql, req, f, bounds[i], filterJSON, first)
		if err != nil {
			return res, fmt.Errorf("stopped after %d message(s): %w", len(res.IDs), err)
		}
		res.add(b)
		if req.OnBatch != nil && b.AuditID != 0 {
			req.OnBatch(b)
		}
		if remaining > 0 {
			if remaining -= n; remaining <= 0 {
				return res, nil
			}
		}
		// A range that gained dead letters since the bounds were taken is
		// finished by the next batch.
		if f.AfterSeq = last; n < f.Limit || last >= bounds[i] {
			f.AfterSeq = bounds[i]
			i++
		}
	}
	return res, nil
}

// batchBounds returns the upper bounds of the batches of size that change
// the dead letters f selects now (queries/dlq_batch_bounds.sql): the seq
// of every size-th and of the last. With none it returns the newest seq,
// so that one batch finds none and records that in the audit log.
func (o *Ops) batchBounds(ctx context.Context, f Filter, size int) ([]int64, error) {
	var maxSeq int64
	if err := o.pool.QueryRow(ctx, o.q.dlqMaxSeq).Scan(&maxSeq); err != nil {
		return nil, err
	}
	rows, err := o.pool.Query(ctx, o.q.dlqBatchBounds, append(f.args(maxSeq), int64(size))...)
	if err != nil {
		return nil, err
	}
	bounds, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if len(bounds) == 0 && err == nil {
		bounds = []int64{maxSeq}
	}
	return bounds, err
}

// changeBatch changes the dead letters f selects (up to upTo) in one
// transaction with its audit entry. It returns what it changed, the last
// seq it selected and how many it selected. Only the first batch records an
// audit entry when it selects nothing.
func (o *Ops) changeBatch(ctx context.Context, action, sql string, req Request, f Filter, upTo int64,
	filterJSON []byte, first bool) (b Result, last int64, n int, err error) {
	err = pgx.BeginFunc(ctx, o.pool, func(tx pgx.Tx) error {
		list, err := o.deadLetters(ctx, tx, f, upTo)
		if err != nil {
			return err
		}
		n = len(list)
		if n == 0 && !first {
			return nil
		}
		seqs := make([]int64, n)
		for i, d := range list {
			seqs[i] = d.Seq
		}
		if n > 0 {
			last = seqs[n-1]
		}
		b, err = o.apply(ctx, tx, action, sql, seqs, req, filterJSON)
		return err
	})
	return b, last, n, err
}

// apply runs replay.sql or discard.sql on seqs in tx and records the audit
// entry there. The statement changes only those still DEAD_LETTER.
func (o *Ops) apply(ctx context.Context, tx pgx.Tx, action, sql string, seqs []int64, req Request, filterJSON []byte) (Result, error) {
	type changed struct {
		Seq int64
		ID  uuid.UUID
	}
	rows, err := tx.Query(ctx, sql, seqs)
	if err != nil {
		return Result{}, err
	}
	done, err := pgx.CollectRows(rows, pgx.RowToStructByPos[changed])
	if err != nil {
		return Result{}, err
	}
	slices.SortFunc(done, func(a, b changed) int { return cmp.Compare(a.Seq, b.Seq) })
	res := Result{IDs: make([]uuid.UUID, len(done))}
	for i, c := range done {
		res.IDs[i] = c.ID
	}
	err = tx.QueryRow(ctx, o.q.auditInsert, req.Actor, action, req.Reason, uuidArray(res.IDs), jsonArg(filterJSON), int64(len(done))).
		Scan(&res.AuditID, &res.At)
	res.AuditIDs = []int64{res.AuditID}
	return res, err
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

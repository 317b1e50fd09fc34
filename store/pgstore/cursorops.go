package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-dev/outbox/store"
)

// CursorModeRead is what [CursorDB.ReadMode] found.
type CursorModeRead struct {
	// Active reports that the outbox is in cursor mode. An outbox whose
	// migrations predate cursor mode is not.
	Active bool
	// Lead is the answer to the attempt to lead, when one was made.
	Lead CursorLead
	// Sent is when the round trip was sent.
	Sent time.Time
}

// ReadMode reads whether the outbox is in cursor mode and, when lead is
// not nil, makes the attempt to lead in the same round trip. In cursor
// mode it also checks the outbox's migrations, and logs a warning when
// migration 012 is missing. It fails with an error wrapping
// [ErrCursorMode] when the outbox is in cursor mode with an outbox_cursor
// older than migration 011.
func (d *CursorDB) ReadMode(ctx context.Context, lead *CursorLeadAttempt) (CursorModeRead, error) {
	s := d.s
	var r CursorModeRead
	b := s.relayBatch()
	if lead != nil {
		queueLeadAttempt(s, b, lead, &r.Lead)
	} else {
		b.Queue(s.q.cursorMode).QueryRow(func(row pgx.Row) error { return row.Scan(&r.Active) })
	}
	r.Sent = time.Now()
	err := s.pool.SendBatch(ctx, b).Close()
	if lead != nil {
		r.Active = r.Lead.Active
	}
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42P01": // undefined_table: before migration 010
		r.Active = false
	case errors.As(err, &pgErr) && pgErr.Code == "42703": // undefined_column: before migration 011
		if err := s.pool.QueryRow(ctx, s.q.cursorMode).Scan(&r.Active); err != nil {
			return r, fmt.Errorf("read the relay mode: %w", err)
		}
		if r.Active {
			return r, fmt.Errorf("read the relay mode: %w: %s.outbox_cursor is older than migration 011; run Migrate ('outbox migrate')",
				ErrCursorMode, s.cfg.Schema)
		}
	case err != nil:
		return r, fmt.Errorf("read the relay mode: %w", err)
	}
	if r.Active {
		s.warnUnmigrated(ctx)
	}
	return r, nil
}

// warnUnmigrated logs a warning when the outbox, in cursor mode, lacks
// migration 012 (an outbox put in cursor mode by an older binary, whose
// relays now run a newer one before 'outbox migrate'): the relay runs, but
// a writer that inserts with its own SQL can lose a message. Once per mode
// read that finds cursor mode, so about once per relay.
func (s *Store) warnUnmigrated(ctx context.Context) {
	var missing int
	if err := s.pool.QueryRow(ctx, s.q.cursorMigrated).Scan(&missing); err != nil {
		s.cfg.Logger.Warn("pgstore: could not check the outbox's migrations for cursor mode", slog.String("schema", s.cfg.Schema), slog.Any("error", err))
		return
	}
	if missing == 12 {
		s.cfg.Logger.Warn("pgstore: the outbox is in cursor mode without migration 012: a transaction that inserts into outbox_messages with its own SQL, not Enqueue, can lose its message; run Migrate ('outbox migrate')",
			slog.String("schema", s.cfg.Schema))
	}
}

// Renew renews the lease of the lead under token for lease, from the
// round trip's start (queries/cursor_renew.sql). It reports whether the
// lead held: false when another relay took the lease over.
func (d *CursorDB) Renew(ctx context.Context, token uuid.UUID, lease time.Duration) (bool, error) {
	s := d.s
	var tag pgconn.CommandTag
	b := s.relayBatch()
	b.Queue(s.q.cursorRenew, token, lease.Milliseconds()).Exec(func(t pgconn.CommandTag) error { tag = t; return nil })
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return false, err
	}
	return tag.RowsAffected() > 0, nil
}

// Resign saves the position of the lead under token and gives up its
// lease (queries/cursor_resign.sql), so that a standby leads at once;
// save.Lease is not used.
func (d *CursorDB) Resign(ctx context.Context, token uuid.UUID, save CursorSave) error {
	s := d.s
	b := s.relayBatch()
	b.Queue(s.q.cursorResign, token, save.Pos, save.Head, save.Lo, save.Hi)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	return nil
}

// CursorFailure is the cursor strategy's record of failed publishes, as
// package failure decided them, of messages held by claim Token.
type CursorFailure struct {
	// Token is the claim that holds the messages.
	Token uuid.UUID
	// Failures are the failed publishes; the last one of a seq counts.
	Failures []store.Failure
	// Queued are the seqs of Failures that are cursor messages the leader
	// handed out under Token: they become FAILED (or DEAD_LETTER) and
	// enter the table path. The others are table-path messages, recorded
	// as in claim mode.
	Queued []int64
	// LeaderToken is the lead's lease token, and Save its save: with
	// Queued set, the save fences the failure of Queued and the move of
	// Behind.
	LeaderToken uuid.UUID
	Save        CursorSave
	// Behind are the later records of the aggregates of Queued in the
	// leader's window: they move to the table path, as PENDING.
	Behind []int64
}

// CursorFailed is what [CursorDB.MarkFailed] did.
type CursorFailed struct {
	// Changed is how many messages it recorded as failed.
	Changed int64
	// Saved reports that the save changed the cursor row: the lead held
	// (Queued was set). False: another relay took the lease over, and no
	// cursor message changed.
	Saved bool
	// Sent is when the round trip was sent.
	Sent time.Time
}

// MarkFailed records f in one round trip: the leader's save first, when f
// has cursor messages (the cursor row stays locked until the round trip
// commits, which fences the writes after it), then the failures, then the
// move of Behind. Behind without Queued is refused with an error wrapping
// ErrInvalidConfig: the save that fences the move comes with Queued.
func (d *CursorDB) MarkFailed(ctx context.Context, f *CursorFailure) (CursorFailed, error) {
	s := d.s
	var r CursorFailed
	if len(f.Behind) > 0 && len(f.Queued) == 0 {
		return r, fmt.Errorf("%w: CursorFailure.Behind: needs Queued, whose save fences the move", ErrInvalidConfig)
	}
	args := newFailureArgs(f.Failures)
	for i, seq := range args.seqs {
		args.queued[i] = slices.Contains(f.Queued, seq)
	}
	b := s.relayBatch()
	mine := len(f.Queued) > 0
	if mine {
		save := f.Save
		b.Queue(s.q.cursorSave, f.LeaderToken, save.Pos, save.Lease.Milliseconds(), save.Head, save.Lo, save.Hi).
			Exec(func(t pgconn.CommandTag) error { r.Saved = t.RowsAffected() > 0; return nil })
	}
	b.Queue(s.q.markFailed, f.Token, args.seqs, args.errs, args.delays, args.counts, args.deads, args.queued, nullToken(f.LeaderToken, mine)).
		QueryRow(func(row pgx.Row) error { return row.Scan(&r.Changed) })
	if len(f.Behind) > 0 {
		b.Queue(s.q.cursorTable, f.LeaderToken, f.Behind)
	}
	r.Sent = time.Now()
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return CursorFailed{}, err
	}
	return r, nil
}

// Release gives the table-path messages of seqs held by claim token back
// to the table, unsent and due at once, as [Store.Release] does, and
// returns how many it changed.
func (d *CursorDB) Release(ctx context.Context, token uuid.UUID, seqs []int64) (int64, error) {
	return d.s.releaseTable(ctx, token, seqs)
}

func nullToken(t uuid.UUID, valid bool) *uuid.UUID {
	if !valid {
		return nil
	}
	return &t
}

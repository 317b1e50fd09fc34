package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnableCursor turns cursor mode on for the store's outbox (see the package
// documentation, "Cursor mode"): messages enqueued from now on are QUEUED,
// and one relay at a time, the leader, reads them in seq order and keeps
// its place in the table outbox_cursor instead of claiming and marking each
// message. Messages already in the table stay with the table path, which
// every relay runs as before; order per aggregate holds across the switch.
// Relays need no other configuration: a Store finds the mode at its first
// claim, and a relay in claim mode follows within a few seconds. Writers
// need nothing either (the status column's default changes).
//
// It runs in one transaction that waits, for at most five seconds, for the
// transactions that are enqueueing right now (see queries/cursor_enable.sql).
// It is idempotent. It fails with an error wrapping [ErrCursorMode] when
// the outbox lacks a migration cursor mode needs (010 to 012: the cursor's
// table and columns, and the trigger that gives every inserting
// transaction its id before its seqs), when a CDC relay serves the
// outbox (package cdc reads PENDING inserts), or when the seq sequence
// caches values (ALTER SEQUENCE ... CACHE 1 restores the default).
func (s *Store) EnableCursor(ctx context.Context) error {
	return s.switchMode(ctx, true, func(ctx context.Context, tx pgx.Tx, c modeCheck) error {
		if c.active {
			return nil
		}
		if c.cdcTable {
			var slot string
			err := tx.QueryRow(ctx, "SELECT slot_name FROM "+pgx.Identifier{s.cfg.Schema, "outbox_cdc_slots"}.Sanitize()+" LIMIT 1").Scan(&slot)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
			case err != nil:
				return fmt.Errorf("look for a CDC relay: %w", err)
			default:
				return fmt.Errorf("%w: the CDC relay's slot %q serves this outbox; remove it first (cdc.Remove)", ErrCursorMode, slot)
			}
		}
		if _, err := tx.Exec(ctx, s.q.cursorEnable); err != nil {
			return fmt.Errorf("switch: %w", err)
		}
		return nil
	})
}

// DisableCursor turns cursor mode off: messages enqueued from now on are
// PENDING and claimed as before, and the QUEUED messages the cursor has not
// passed become PENDING. It returns how many did. The cursor row stays
// (inactive) so that QUEUED messages at or below its position still count
// as sent. Stop the relays first: it fails with an error wrapping
// [ErrCursorMode] while a relay leads the cursor, since that relay may be
// publishing messages that would then be claimed too. It is idempotent.
func (s *Store) DisableCursor(ctx context.Context) (int64, error) {
	var moved int64
	err := s.switchMode(ctx, false, func(ctx context.Context, tx pgx.Tx, c modeCheck) error {
		if !c.active {
			return nil
		}
		if c.leader != nil {
			return fmt.Errorf("%w: relay %q leads the cursor until %s; stop the relays first",
				ErrCursorMode, *c.leader, c.leaderUntil.Format(time.RFC3339))
		}
		if _, err := tx.Exec(ctx, s.q.cursorDisable); err != nil {
			return fmt.Errorf("switch: %w", err)
		}
		tag, err := tx.Exec(ctx, s.q.cursorUnqueue)
		if err != nil {
			return fmt.Errorf("move unsent QUEUED messages to PENDING: %w", err)
		}
		moved = tag.RowsAffected()
		return nil
	})
	return moved, err
}

// modeCheck is what queries/cursor_check.sql reads.
type modeCheck struct {
	active      bool
	leader      *string
	leaderUntil time.Time
	seqCache    *int64
	cdcTable    bool // outbox_cdc_slots exists
}

// switchMode runs fn in a transaction that holds the migration lock (so
// that it does not race Migrate or another switch), after the checks both
// directions share.
func (s *Store) switchMode(ctx context.Context, enable bool, fn func(context.Context, pgx.Tx, modeCheck) error) error {
	what := "disable"
	if enable {
		what = "enable"
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.q.migrateLock, s.migrateLockKey()); err != nil {
			return fmt.Errorf("take advisory lock: %w", err)
		}
		if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '5s'"); err != nil {
			return err
		}
		var (
			c      modeCheck
			active *bool
			until  *time.Time
		)
		var missing int
		if err := tx.QueryRow(ctx, s.q.cursorMigrated).Scan(&missing); err != nil {
			return fmt.Errorf("check: %w", err)
		}
		if missing == 1 {
			return noTables(s.cfg.Schema, nil)
		}
		// Disabling needs no trigger: the outbox goes back to claim mode.
		if missing != 0 && (enable || missing < 12) {
			return fmt.Errorf("%w: the outbox in schema %s lacks migration %03d; run Migrate ('outbox migrate') first", ErrCursorMode, s.cfg.Schema, missing)
		}
		if err := tx.QueryRow(ctx, s.q.cursorCheck).Scan(&active, &c.leader, &until, &c.seqCache, &c.cdcTable); err != nil {
			return fmt.Errorf("check: %w", err)
		}
		c.active, c.leaderUntil = deref(active), deref(until)
		if enable && c.seqCache != nil && *c.seqCache != 1 {
			return fmt.Errorf("%w: the seq sequence of %s.outbox_messages caches %d values; cursor mode needs CACHE 1",
				ErrCursorMode, s.cfg.Schema, *c.seqCache)
		}
		return fn(ctx, tx, c)
	})
	if err != nil {
		return fmt.Errorf("pgstore: %s cursor mode: %w", what, s.explain(err))
	}
	return nil
}

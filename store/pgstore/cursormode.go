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
// Relays read the outbox with the cursor strategy (package relay/cursor,
// on [Store.CursorDB]) from then on:
// the claims of a Store see the switch within a few seconds and refuse
// with [ErrNotClaimMode]. Writers need nothing (the status column's default
// changes).
//
// It is [Store.SetMode] to [ModeCursor] (it records the mode, with the
// database role as who switched), but for an outbox in CDC mode, which it
// refuses as it always did: SetMode leaves CDC mode. It runs in one
// transaction that waits, for at most five seconds, for the transactions
// that are enqueueing right now (see queries/cursor_enable.sql). It is
// idempotent. It fails with an error wrapping [ErrCursorMode] (and
// [ErrModeSwitch]) when the outbox lacks a migration cursor mode needs
// (010 to 012: the cursor's table and columns, and the trigger that gives
// every inserting transaction its id before its seqs), when a CDC relay
// serves the outbox (package cdc reads PENDING inserts), or when the seq
// sequence caches values (ALTER SEQUENCE ... CACHE 1 restores the default).
func (s *Store) EnableCursor(ctx context.Context) error {
	_, err := s.setMode(ctx, switchRequest{to: ModeCursor, alias: "enable"})
	return err
}

// DisableCursor turns cursor mode off: messages enqueued from now on are
// PENDING and claimed as before, and the QUEUED messages the cursor has not
// passed become PENDING. It returns how many did. The cursor row stays
// (inactive) so that QUEUED messages at or below its position still count
// as sent. Stop the relays first: it fails with an error wrapping
// [ErrCursorMode] (and [ErrModeSwitch]) while a relay leads the cursor,
// since that relay may be publishing messages that would then be claimed
// too. It is idempotent.
//
// It is [Store.SetMode] to [ModeClaim] for an outbox in cursor mode, and
// does nothing in another mode.
func (s *Store) DisableCursor(ctx context.Context) (int64, error) {
	sw, err := s.setMode(ctx, switchRequest{to: ModeClaim, alias: "disable"})
	return sw.Requeued, err
}

// modeCheck is what queries/cursor_check.sql reads.
type modeCheck struct {
	active      bool
	leader      *string
	leaderUntil time.Time
	seqCache    *int64
	cdcTable    bool // outbox_cdc_slots exists
}

// checkCursor reads queries/cursor_check.sql in tx.
func (s *Store) checkCursor(ctx context.Context, tx pgx.Tx) (modeCheck, error) {
	var c modeCheck
	var active *bool
	var until *time.Time
	if err := tx.QueryRow(ctx, s.q.cursorCheck).Scan(&active, &c.leader, &until, &c.seqCache, &c.cdcTable); err != nil {
		return c, fmt.Errorf("check: %w", err)
	}
	c.active, c.leaderUntil = deref(active), deref(until)
	return c, nil
}

// switchState is what a switch starts from.
type switchState struct {
	modeCheck
	tables modeTables
	from   Mode
}

// switchState checks the migrations the switch needs and reads the mode
// the outbox is in, locking its record (queries/mode_lock.sql).
func (s *Store) switchState(ctx context.Context, tx pgx.Tx, req switchRequest) (switchState, error) {
	var st switchState
	var missing int
	if err := tx.QueryRow(ctx, s.q.cursorMigrated).Scan(&missing); err != nil {
		return st, fmt.Errorf("check: %w", err)
	}
	if missing == 1 {
		return st, noTables(s.cfg.Schema, nil)
	}
	// Leaving cursor mode needs no trigger: the outbox goes back to claims.
	if missing != 0 && (req.to == ModeCursor || missing < 12) {
		return st, refuse("the outbox in schema %s lacks migration %03d; run Migrate ('outbox migrate') first", s.cfg.Schema, missing)
	}
	var err error
	if st.tables, err = s.modeTables(ctx, tx); err != nil {
		return st, err
	}
	if !st.tables.modeTable && req.alias == "" {
		return st, refuse("the outbox in schema %s lacks migration 017 (the record of its relay mode); run Migrate ('outbox migrate') first", s.cfg.Schema)
	}
	if st.modeCheck, err = s.checkCursor(ctx, tx); err != nil {
		return st, err
	}
	if !st.tables.modeTable {
		st.from, err = s.derivedMode(ctx, tx, st.tables)
		return st, err
	}
	err = tx.QueryRow(ctx, s.modeSQL("mode_lock.sql")).Scan(&st.from)
	if errors.Is(err, pgx.ErrNoRows) { // the row was deleted: derive it, and record it again
		st.from, err = s.derivedMode(ctx, tx, st.tables)
	}
	if err != nil {
		return st, fmt.Errorf("read the mode: %w", err)
	}
	return st, nil
}

// leaveMode takes the steps out of st.from, and returns the CDC slots to
// drop once everything else is done.
func (s *Store) leaveMode(ctx context.Context, tx pgx.Tx, st switchState, sw *ModeSwitch) ([]cdcSlot, error) {
	switch st.from {
	case ModeCursor:
		return nil, s.leaveCursor(ctx, tx, st, sw)
	case ModeCDC:
		if st.tables.cdcSlots {
			return s.leaveCDC(ctx, tx)
		}
	}
	return nil, nil
}

// leaveCursor turns cursor mode off, unless a relay leads the cursor: the
// check of st, made without a lock at the start of the switch, refuses
// early, and queries/cursor_deactivate.sql decides, under the locks that
// order the switch after every lead and read before it and before every
// one after it (see queries/cursor_disable.sql). The unsent QUEUED
// messages become PENDING.
func (s *Store) leaveCursor(ctx context.Context, tx pgx.Tx, st switchState, sw *ModeSwitch) error {
	leads := func(owner string, until time.Time) error {
		return refuse("relay %q leads the cursor until %s; stop the relays first, then switch", owner, until.Format(time.RFC3339))
	}
	if st.leader != nil {
		return leads(*st.leader, st.leaderUntil)
	}
	if _, err := tx.Exec(ctx, s.q.cursorDisable); err != nil {
		return fmt.Errorf("switch: %w", err)
	}
	tag, err := tx.Exec(ctx, s.q.cursorDeactivate)
	if err != nil {
		return fmt.Errorf("switch: %w", err)
	}
	if tag.RowsAffected() == 0 {
		// A standby took the lead after the check (or the row is gone,
		// which the check reads as no leader).
		again, err := s.checkCursor(ctx, tx)
		if err != nil {
			return err
		}
		if again.leader != nil {
			return leads(*again.leader, again.leaderUntil)
		}
	}
	tag, err = tx.Exec(ctx, s.q.cursorUnqueue)
	if err != nil {
		return fmt.Errorf("move unsent QUEUED messages to PENDING: %w", err)
	}
	sw.Requeued = tag.RowsAffected()
	return nil
}

// enterMode takes the steps into mode to, after leaveMode.
func (s *Store) enterMode(ctx context.Context, tx pgx.Tx, st switchState, to Mode) error {
	switch to {
	case ModeCursor:
		if st.seqCache != nil && *st.seqCache != 1 {
			return refuse("the seq sequence of %s.outbox_messages caches %d values; cursor mode needs CACHE 1",
				s.cfg.Schema, *st.seqCache)
		}
		if st.from != ModeCDC && st.cdcTable {
			slots, err := s.cdcSlots(ctx, tx)
			if err != nil {
				return err
			}
			if len(slots) > 0 {
				return refuse("the CDC relay's slot %q is recorded for this outbox: stop the CDC relays, then run "+
					"'outbox mode set cdc' and 'outbox mode set cursor' (Store.SetMode), which drops the slot and forgets it "+
					"on the way out of CDC mode; or remove it with cdc.Remove", slots[0].name)
			}
		}
		if _, err := tx.Exec(ctx, s.q.cursorEnable); err != nil {
			return fmt.Errorf("switch: %w", err)
		}
	case ModeCDC:
		if st.tables.walLevel != "logical" {
			return refuse("CDC mode needs wal_level = logical, not %s (ALTER SYSTEM SET wal_level = logical, then restart PostgreSQL)",
				st.tables.walLevel)
		}
	}
	return nil
}

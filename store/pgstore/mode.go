package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Mode is an outbox's relay mode: how its messages get from the table to
// the broker. The outbox records it in one row (migration 017, the table
// outbox_relay_mode): [Store.Mode] reads it and [Store.SetMode] switches
// it. Every tool reports this record, and a relay whose mode differs from
// it refuses to start (package cdc; the relay command).
type Mode string

// The relay modes.
const (
	// ModeClaim: every relay claims messages and marks each one SENT, so
	// that any number of relays share the work. The mode of a new outbox.
	ModeClaim Mode = "claim"
	// ModeCursor: new messages are QUEUED, and one relay at a time, the
	// leader, reads them in seq order and keeps its place in outbox_cursor
	// (see the package documentation, "Cursor mode").
	ModeCursor Mode = "cursor"
	// ModeCDC: one relay of package cdc reads the inserts from the WAL
	// through a logical replication slot, which it creates at start; the
	// mode only permits it.
	ModeCDC Mode = "cdc"
)

// Modes returns the relay modes, in the order the tools list them.
func Modes() []Mode { return []Mode{ModeClaim, ModeCursor, ModeCDC} }

// ParseMode returns the mode named s, or an error naming the modes.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes() {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("pgstore: mode %q: must be claim, cursor or cdc", s)
}

// ModeState is an outbox's relay mode as [Store.Mode] reads it.
type ModeState struct {
	// Mode is the mode the outbox is in.
	Mode Mode
	// Since is when the outbox entered Mode, and By who switched it:
	// SetMode's actor, the database role (a switch by a binary older than
	// migration 017), or "migration 017" for the mode the migration found.
	Since time.Time
	By    string
	// Recorded is false for an outbox without migration 017: Mode is then
	// derived as the migration would record it (cursor while cursor mode
	// is on, cdc while a slot a CDC relay recorded still exists in the
	// database and is not lost, else claim), and Since and By are zero.
	Recorded bool
}

// ModeSwitch is what [Store.SetMode] did.
type ModeSwitch struct {
	// From is the mode the outbox was in, To the one it is in now; they
	// are equal when there was nothing to do.
	From, To Mode
	// Requeued counts the unsent QUEUED messages that became PENDING,
	// for the claims, as the outbox left cursor mode.
	Requeued int64
	// DroppedSlots names the CDC relays' replication slots that were
	// dropped (with their publications) as the outbox left CDC mode.
	DroppedSlots []string
}

// ErrModeSwitch is wrapped by the errors of [Store.SetMode] (and of
// EnableCursor and DisableCursor) when the outbox cannot switch now. The
// message says why and what to do: stop the relays that the switch would
// race (a cursor's leader, a CDC relay streaming from its slot), run
// Migrate, or change a server setting.
var ErrModeSwitch = errors.New("pgstore: cannot switch the relay mode")

// A CDC relay that just stopped may hold its slot for a moment: SetMode
// tries again every slotFreePoll for up to slotFreeWait before it refuses.
const (
	slotFreeWait = 10 * time.Second
	slotFreePoll = 100 * time.Millisecond
)

// Mode reads the outbox's relay mode: the record of migration 017, or, for
// an outbox without it, the mode derived from the cursor and the CDC
// relays' slots (ModeState.Recorded false). An outbox without tables gives
// an error wrapping [ErrNotMigrated].
func (s *Store) Mode(ctx context.Context) (ModeState, error) {
	var st ModeState
	err := s.pool.QueryRow(ctx, s.modeSQL("mode_get.sql")).Scan(&st.Mode, &st.Since, &st.By)
	if err == nil {
		st.Recorded = true
		return st, nil
	}
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); errors.Is(err, pgx.ErrNoRows) ||
		ok && (pgErr.Code == codeUndefinedTable || pgErr.Code == codeInvalidSchemaName) {
		t, terr := s.modeTables(ctx, s.pool)
		if terr == nil {
			st.Mode, terr = s.derivedMode(ctx, s.pool, t)
		}
		if terr == nil {
			return st, nil
		}
		err = terr
	}
	return ModeState{}, fmt.Errorf("pgstore: read the relay mode: %w", s.explain(err))
}

// ModeAfterSwitch is [Store.Mode], read once no switch of the mode is in
// progress: it waits for a [Store.SetMode] (or a Migrate) that runs now to
// end, and a switch that starts later sees everything the caller committed
// before the call. A relay that set itself up for its mode reads it before
// it starts to relay: a switch out of the mode either ended before, and
// this read sees it (the relay undoes its set-up), or finds the set-up
// done (the CDC relay's slot recorded) and undoes it itself. It waits on
// SetMode's advisory lock, taken shared and released at once.
func (s *Store) ModeAfterSwitch(ctx context.Context) (ModeState, error) {
	if _, err := s.pool.Exec(ctx, s.modeSQL("mode_wait_switch.sql"), s.migrateLockKey()); err != nil {
		return ModeState{}, fmt.Errorf("pgstore: wait for a switch of the relay mode: %w", s.explain(err))
	}
	return s.Mode(ctx)
}

// SetMode switches the outbox to mode to, taking every step the switch
// needs, in one transaction that holds Migrate's lock, and records when
// and by whom (by; the database role when empty). It is idempotent: the
// outbox already in mode to is left as it is (ModeSwitch.From == To).
//
//   - Into cursor mode: as [Store.EnableCursor] (new messages are QUEUED;
//     those in the table stay with the claims, and order per aggregate
//     holds). Relays read it with the cursor strategy (package
//     relay/cursor); the claims of a Store
//     refuse within seconds ([ErrNotClaimMode]).
//   - Out of cursor mode: as [Store.DisableCursor] (the unsent QUEUED
//     messages become PENDING). Refused while a relay leads the cursor:
//     stop the relays first.
//   - Into CDC mode: permits the CDC relay (package cdc), which creates
//     its slot at start and sends what is unsent meanwhile through its
//     table path. Needs wal_level = logical. Relays in claim mode go on
//     claiming until they stop; both at once is safe (docs/cdc.md).
//   - Out of CDC mode: drops the CDC relays' recorded slots and their
//     publications and forgets them, so that PostgreSQL stops keeping WAL
//     for them. Refused while a CDC relay streams from a slot (SetMode
//     waits up to 10 s for one that is stopping): stop the CDC relays,
//     standbys included, first. What they had not recorded as sent is
//     still PENDING in the table, for the relays of the new mode.
//
// A refusal wraps [ErrModeSwitch] and says what to do; an outbox without
// migration 017 is refused too ("run Migrate").
func (s *Store) SetMode(ctx context.Context, to Mode, by string) (ModeSwitch, error) {
	if _, err := ParseMode(string(to)); err != nil {
		return ModeSwitch{}, err
	}
	return s.setMode(ctx, switchRequest{to: to, by: by})
}

// switchRequest is a switch SetMode or one of its aliases asked for.
type switchRequest struct {
	to Mode
	by string
	// alias is "enable" or "disable" for EnableCursor and DisableCursor,
	// which keep their own rules (see switchTx) and error sentinel.
	alias string
}

// what names the switch in errors.
func (r switchRequest) what(schema string) string {
	if r.alias != "" {
		return r.alias + " cursor mode"
	}
	return fmt.Sprintf("switch the outbox in schema %s to %s mode", schema, r.to)
}

// setMode runs the switch's transaction, again while a CDC slot it must
// drop is still held by a stopping relay, for up to slotFreeWait.
func (s *Store) setMode(ctx context.Context, req switchRequest) (ModeSwitch, error) {
	giveUp := time.Now().Add(slotFreeWait)
	for {
		var sw ModeSwitch
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var err error
			sw, err = s.switchTx(ctx, tx, req)
			return err
		})
		if err == nil {
			return sw, nil
		}
		if !errors.Is(err, errSlotInUse) || time.Now().After(giveUp) {
			return ModeSwitch{}, &modeError{what: req.what(s.cfg.Schema), err: s.explain(err), cursor: req.alias != ""}
		}
		t := time.NewTimer(slotFreePoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return ModeSwitch{}, &modeError{what: req.what(s.cfg.Schema), err: err, cursor: req.alias != ""}
		case <-t.C:
		}
	}
}

// switchTx is one attempt of a switch, in tx. EnableCursor does not leave
// CDC mode (it refuses, as it always did), and DisableCursor leaves only
// cursor mode.
func (s *Store) switchTx(ctx context.Context, tx pgx.Tx, req switchRequest) (ModeSwitch, error) {
	if _, err := tx.Exec(ctx, s.q.migrateLock, s.migrateLockKey()); err != nil {
		return ModeSwitch{}, fmt.Errorf("take advisory lock: %w", err)
	}
	if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '5s'"); err != nil {
		return ModeSwitch{}, err
	}
	st, err := s.switchState(ctx, tx, req)
	if err != nil {
		return ModeSwitch{}, err
	}
	sw := ModeSwitch{From: st.from, To: req.to}
	switch {
	case req.alias == "disable" && st.from != ModeCursor:
		sw.To = st.from
		return sw, nil
	case st.from == req.to:
		return sw, nil
	case req.alias == "enable" && st.from == ModeCDC:
		return ModeSwitch{}, refuse("the outbox in schema %s is in cdc mode: run 'outbox mode set cursor' (Store.SetMode), "+
			"which drops the CDC relay's slot once the CDC relays are stopped", s.cfg.Schema)
	}
	slots, err := s.leaveMode(ctx, tx, st, &sw)
	if err != nil {
		return ModeSwitch{}, err
	}
	if err := s.enterMode(ctx, tx, st, req.to); err != nil {
		return ModeSwitch{}, err
	}
	if st.tables.modeTable {
		if _, err := tx.Exec(ctx, s.modeSQL("mode_set.sql"), string(req.to), req.by); err != nil {
			return ModeSwitch{}, fmt.Errorf("record the mode: %w", err)
		}
	}
	// Last: dropping a slot is not undone if the transaction rolls back.
	for _, slot := range slots {
		if err := s.dropSlot(ctx, tx, slot); err != nil {
			return ModeSwitch{}, err
		}
		sw.DroppedSlots = append(sw.DroppedSlots, slot.name)
	}
	return sw, nil
}

// modeTables is what queries/mode_tables.sql reads.
type modeTables struct {
	messages, cursor, cdcSlots, modeTable bool
	walLevel                              string
}

func (s *Store) modeTables(ctx context.Context, q queryer) (modeTables, error) {
	var t modeTables
	if err := q.QueryRow(ctx, s.modeSQL("mode_tables.sql")).Scan(&t.messages, &t.cursor, &t.cdcSlots, &t.modeTable, &t.walLevel); err != nil {
		return t, fmt.Errorf("find the outbox tables: %w", err)
	}
	if !t.messages {
		return t, noTables(s.cfg.Schema, nil)
	}
	return t, nil
}

// derivedMode is the mode of an outbox without migration 017's record, as
// the migration derives it: cursor while cursor mode is on, cdc while a
// slot a CDC relay recorded exists in this database and is not lost
// (whether or not a relay streams from it now), else claim.
func (s *Store) derivedMode(ctx context.Context, q queryer, t modeTables) (Mode, error) {
	if t.cursor {
		var active bool
		if err := q.QueryRow(ctx, s.q.cursorMode).Scan(&active); err != nil {
			return "", fmt.Errorf("read the cursor: %w", err)
		}
		if active {
			return ModeCursor, nil
		}
	}
	if t.cdcSlots {
		slots, err := s.cdcSlots(ctx, q)
		if err != nil {
			return "", err
		}
		if slices.ContainsFunc(slots, cdcSlot.streamable) {
			return ModeCDC, nil
		}
	}
	return ModeClaim, nil
}

// queryer is what both a pool and a transaction offer.
type queryer interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// modeError is a failed switch: what names it, err says why. An error of
// EnableCursor or DisableCursor (cursor) also wraps ErrCursorMode when it
// is a refusal, as it always did.
type modeError struct {
	what   string
	err    error
	cursor bool
}

func (e *modeError) Error() string { return "pgstore: " + e.what + ": " + e.err.Error() }

func (e *modeError) Unwrap() []error {
	if e.cursor && errors.Is(e.err, ErrModeSwitch) {
		return []error{e.err, ErrCursorMode}
	}
	return []error{e.err}
}

// refusal is a switch that cannot be made now; its message says why and
// what to do. inUse marks a CDC slot still held by a relay, which setMode
// waits for.
type refusal struct {
	msg   string
	inUse bool
}

// errSlotInUse is wrapped by a refusal because a relay streams from a CDC
// slot the switch must drop.
var errSlotInUse = errors.New("pgstore: a CDC relay streams from the slot")

func (e *refusal) Error() string { return e.msg }

func (e *refusal) Unwrap() []error {
	if e.inUse {
		return []error{ErrModeSwitch, errSlotInUse}
	}
	return []error{ErrModeSwitch}
}

func refuse(format string, args ...any) error { return &refusal{msg: fmt.Sprintf(format, args...)} }

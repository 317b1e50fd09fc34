package cdc

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/outbox-dev/outbox/store/pgstore"
)

// checkMode stops the relay, with an error wrapping ErrNotCDCMode, when
// the outbox's recorded relay mode is not cdc. The active relay runs it
// before setup, so that it creates no slot for an outbox in another mode,
// and confirmMode after. An error reading the mode is not fatal: the
// session is tried again.
func (r *Relay) checkMode(ctx context.Context) error {
	st, err := r.store.Mode(ctx)
	if err != nil {
		return fmt.Errorf("cdc: read the relay mode: %w", err)
	}
	if st.Mode != pgstore.ModeCDC {
		return r.notCDCMode(st.Mode)
	}
	return nil
}

// notCDCMode is the fatal error for an outbox in mode m.
func (r *Relay) notCDCMode(m pgstore.Mode) error {
	return fatal(fmt.Errorf("%w: the outbox in schema %s is in %s mode; run 'outbox mode set cdc' "+
		"(pgstore.Store.SetMode) to switch it, or run the relay of that mode", ErrNotCDCMode, r.cfg.Schema, m))
}

// confirmMode reads the mode again once setup made the slot (or found the
// recorded slot lost), before the stream starts, after any switch in
// progress has ended (pgstore.Store.ModeAfterSwitch). A switch out of CDC
// mode drops and forgets the recorded slots while no walsender streams
// from them, so one that ran after checkMode may have done so before setup
// created the slot again (or while setup read the slot and its record):
// confirmMode then drops what setup made (the slot, its record, the
// publication), as the switch would have, and stops the relay with an
// error wrapping ErrNotCDCMode. A switch that starts later finds the slot
// recorded, and drops it before the stream starts (which then fails, and
// the next session's checkMode stops the relay) or is refused once the
// relay streams.
func (r *Relay) confirmMode(ctx context.Context) error {
	// Not cut short by Stop: a slot that setup made while the outbox left
	// CDC mode must not stay behind, holding WAL.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RemoveWait+5*time.Second)
	defer cancel()
	st, err := r.store.ModeAfterSwitch(rctx)
	if err != nil {
		return fmt.Errorf("cdc: read the relay mode: %w", err)
	}
	if st.Mode == pgstore.ModeCDC {
		return nil
	}
	r.log.Warn("the outbox was switched out of CDC mode while this relay set up its slot; dropping the slot",
		slog.String("mode", string(st.Mode)))
	undo, cancel := context.WithTimeout(context.WithoutCancel(ctx), RemoveWait+5*time.Second)
	defer cancel()
	if err := remove(undo, r.cfg.Pool, r.cfg.Schema, r.cfg.Slot, r.cfg.Publication, "outbox_cdc_slots"); err != nil {
		r.log.Error("could not drop the slot that this relay set up; it keeps WAL until it is dropped "+
			"(cdc.Remove, or 'outbox mode set cdc' and then 'outbox mode set "+string(st.Mode)+"')", slog.Any("error", err))
	}
	return r.notCDCMode(st.Mode)
}

// watchMode is called by keepLead while the relay streams: when the
// outbox's mode is no longer cdc (changed in a way that does not wait for
// the CDC relays, such as an UPDATE of its record), the relay stops, as
// on Stop, and Err wraps ErrNotCDCMode. An error reading the mode is
// ignored: the next renewal reads it again.
func (r *Relay) watchMode(ctx context.Context) {
	if !r.leader.Load() {
		return
	}
	st, err := r.store.Mode(ctx)
	if err != nil || st.Mode == pgstore.ModeCDC {
		return
	}
	err = fmt.Errorf("%w: the outbox in schema %s was switched to %s mode while this relay streamed from slot %s; "+
		"it stops. The slot keeps WAL until it is dropped: with the CDC relays stopped, 'outbox mode set cdc' and then "+
		"'outbox mode set %s' drop it (or cdc.Remove)", ErrNotCDCMode, r.cfg.Schema, st.Mode, r.cfg.Slot, st.Mode)
	r.log.Error("the outbox left CDC mode; the relay stops", slog.Any("error", err))
	r.stopWith(err)
}

// stopWith stops the relay as Stop does, with err as the fatal error that
// Err and Stop return.
func (r *Relay) stopWith(err error) {
	r.mu.Lock()
	if r.cause == nil {
		r.cause = err
	}
	r.mu.Unlock()
	r.stopping.Close()
}

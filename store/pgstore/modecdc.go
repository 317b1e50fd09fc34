package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// cdcSlot is a slot a CDC relay recorded for this outbox in
// outbox_cdc_slots (package cdc), as queries/mode_cdc_slots.sql reads it.
type cdcSlot struct {
	name, publication string
	exists            bool   // in pg_replication_slots, for this database
	lost              bool   // invalidated by PostgreSQL (wal_status lost)
	activePID         *int32 // the walsender streaming from it, if any
}

// streamable reports whether a CDC relay can stream from the slot: it
// exists in this database and was not invalidated. Only such a slot makes
// the mode of an outbox before migration 017 cdc (see derivedMode).
func (c cdcSlot) streamable() bool { return c.exists && !c.lost }

// cdcSlots reads the recorded slots; outbox_cdc_slots must exist.
func (s *Store) cdcSlots(ctx context.Context, q queryer) ([]cdcSlot, error) {
	rows, err := q.Query(ctx, s.modeSQL("mode_cdc_slots.sql"))
	if err != nil {
		return nil, fmt.Errorf("read the CDC slots: %w", err)
	}
	slots, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (cdcSlot, error) {
		var c cdcSlot
		err := row.Scan(&c.name, &c.publication, &c.exists, &c.lost, &c.activePID)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("read the CDC slots: %w", err)
	}
	return slots, nil
}

// leaveCDC refuses while a CDC relay streams from a recorded slot, and
// otherwise drops the slots' publications and forgets the slots; it
// returns the slots, which switchTx drops last.
func (s *Store) leaveCDC(ctx context.Context, tx pgx.Tx) ([]cdcSlot, error) {
	slots, err := s.cdcSlots(ctx, tx)
	if err != nil {
		return nil, err
	}
	for _, c := range slots {
		if c.activePID != nil {
			return nil, slotInUse(c.name, fmt.Sprintf("walsender pid %d", *c.activePID))
		}
	}
	for _, c := range slots {
		if _, err := tx.Exec(ctx, "DROP PUBLICATION IF EXISTS "+pgx.Identifier{c.publication}.Sanitize()); err != nil {
			return nil, fmt.Errorf("drop the CDC relay's publication %s: %w", c.publication, err)
		}
	}
	if _, err := tx.Exec(ctx, "DELETE FROM "+pgx.Identifier{s.cfg.Schema, "outbox_cdc_slots"}.Sanitize()); err != nil {
		return nil, fmt.Errorf("forget the CDC slots: %w", err)
	}
	return slots, nil
}

// dropSlot drops a slot leaveCDC found, unless it is gone already.
func (s *Store) dropSlot(ctx context.Context, tx pgx.Tx, c cdcSlot) error {
	if !c.exists {
		return nil
	}
	_, err := tx.Exec(ctx, "SELECT pg_drop_replication_slot($1)", c.name)
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == "55006" { // object_in_use
		return slotInUse(c.name, pgErr.Message)
	}
	if err != nil {
		return fmt.Errorf("drop the CDC relay's slot %s: %w", c.name, err)
	}
	return nil
}

// slotInUse is the refusal while a CDC relay streams from slot.
func slotInUse(slot, who string) error {
	return &refusal{inUse: true, msg: fmt.Sprintf("a CDC relay streams from slot %q (%s): stop the CDC relays, "+
		"standbys included, then switch; what they had not recorded as sent stays PENDING for the next mode's relays", slot, who)}
}

// modeSQL returns the embedded query file, rendered for the store's schema.
func (s *Store) modeSQL(file string) string {
	b, err := queryFiles.ReadFile("queries/" + file)
	if err != nil {
		panic("pgstore: embedded query " + file + " is missing") // a build without the file
	}
	return s.render(strings.TrimSpace(string(b)))
}

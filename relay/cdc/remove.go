package cdc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox/internal/conf"
	"github.com/outbox-dev/outbox/internal/sqlname"
)

// removePoll is how often Remove tries the drop again while a walsender
// holds the slot.
const removePoll = 50 * time.Millisecond

// RemoveWait is how long [Remove] waits for a walsender to let go of the
// slot: a relay that just stopped releases it within moments, while one
// that still runs (or any other client streaming from the slot) holds it
// for as long as it runs.
const RemoveWait = 10 * time.Second

// SQLSTATEs of pg_drop_replication_slot that Remove tells apart.
const (
	sqlstateObjectInUse     = "55006" // a walsender streams from the slot
	sqlstateUndefinedObject = "42704" // no such slot
)

// Remove undoes what a CDC relay set up in the database, for a relay that
// is stopped for good: it drops the replication slot, so that PostgreSQL
// stops keeping WAL for it, drops the publication, and forgets the slot in
// the schema's outbox_cdc_slots and its lease in outbox_cdc_leases. A slot
// or publication that does not exist is not an error. slot defaults to
// DefaultSlot(schema) and publication to slot, as in Config.
//
// While a walsender streams from the slot (a relay that just stopped may
// still hold it for a moment), Remove tries again for up to [RemoveWait];
// if the slot is still in use then, or when ctx ends first, the error wraps
// [ErrSlotInUse] and PostgreSQL's error, which names the walsender's pid.
// Any other failure (a role without the REPLICATION attribute, a lost
// connection) is returned at once, as PostgreSQL reported it. Nothing is
// removed unless the slot is gone.
func Remove(ctx context.Context, pool *pgxpool.Pool, schema, slot, publication string) error {
	if slot == "" {
		slot = DefaultSlot(schema)
	}
	if publication == "" {
		publication = slot
	}
	err := conf.First(ErrInvalidConfig,
		sqlname.Schema("Schema", schema),
		conf.Rule("Slot", nameRe.MatchString(slot), "%q must match %s", slot, nameRe),
		conf.Rule("Publication", nameRe.MatchString(publication), "%q must match %s", publication, nameRe),
	)
	if err != nil {
		return err
	}
	return remove(ctx, pool, schema, slot, publication, "outbox_cdc_slots", "outbox_cdc_leases")
}

// remove drops slot (waiting as Remove does) and publication, and then
// deletes slot's row from each of the relay's tables named.
func remove(ctx context.Context, pool *pgxpool.Pool, schema, slot, publication string, tables ...string) error {
	if err := dropSlot(ctx, pool, slot); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, "DROP PUBLICATION IF EXISTS "+pgx.Identifier{publication}.Sanitize()); err != nil {
		return fmt.Errorf("cdc: remove: drop publication %s: %w", publication, err)
	}
	for _, table := range tables {
		if err := forgetSlot(ctx, pool, pgx.Identifier{schema, table}.Sanitize(), slot); err != nil {
			return err
		}
	}
	return nil
}

// forgetSlot deletes slot's row from the relay's table, if the table
// exists.
func forgetSlot(ctx context.Context, pool *pgxpool.Pool, table, slot string) error {
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&exists); err != nil {
		return fmt.Errorf("cdc: remove: find %s: %w", table, err)
	}
	if exists {
		if _, err := pool.Exec(ctx, "DELETE FROM "+table+" WHERE slot_name = $1", slot); err != nil {
			return fmt.Errorf("cdc: remove: forget slot %s in %s: %w", slot, table, err)
		}
	}
	return nil
}

// dropSlot drops slot, or finds it gone, trying again every removePoll for
// up to RemoveWait while a walsender holds it.
func dropSlot(ctx context.Context, pool *pgxpool.Pool, slot string) error {
	waitCtx, cancel := context.WithTimeout(ctx, RemoveWait)
	defer cancel()
	var inUse error // the last refusal because a walsender holds the slot
	gaveUp := func() error {
		return fmt.Errorf("%w: gave up dropping slot %s; stop the relay or client streaming from it, then remove again: %w",
			ErrSlotInUse, slot, inUse)
	}
	for {
		_, err := pool.Exec(ctx, "SELECT pg_drop_replication_slot($1)", slot)
		if err == nil {
			return nil
		}
		pgErr, ok := errors.AsType[*pgconn.PgError](err)
		switch {
		case ok && pgErr.Code == sqlstateUndefinedObject:
			return nil
		case ok && pgErr.Code == sqlstateObjectInUse:
			inUse = err
		case ctx.Err() != nil && inUse != nil:
			return gaveUp() // the caller's deadline ended a retry
		default:
			return fmt.Errorf("cdc: remove: drop slot %s: %w", slot, err)
		}
		t := time.NewTimer(removePoll)
		select {
		case <-waitCtx.Done():
			t.Stop()
			return gaveUp()
		case <-t.C:
		}
	}
}

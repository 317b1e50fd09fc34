package cdc

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// removePoll is how often Remove looks whether the slot's walsender let go.
const removePoll = 50 * time.Millisecond

// Remove undoes what a CDC relay set up in the database, for a relay that
// is stopped for good: it waits until no walsender streams from the slot
// (a relay that just stopped may still hold it for a moment), drops the
// replication slot, so that PostgreSQL stops keeping WAL for it, drops the
// publication, and forgets the slot in the schema's outbox_cdc_slots. A
// slot or publication that does not exist is not an error. slot defaults to
// DefaultSlot(schema) and publication to slot, as in Config. It returns
// ctx's error if the slot is still in use when ctx ends.
func Remove(ctx context.Context, pool *pgxpool.Pool, schema, slot, publication string) error {
	if slot == "" {
		slot = DefaultSlot(schema)
	}
	if publication == "" {
		publication = slot
	}
	switch {
	case !schemaRe.MatchString(schema):
		return fmt.Errorf("%w: Schema %q must match %s", ErrInvalidConfig, schema, schemaRe)
	case !nameRe.MatchString(slot):
		return fmt.Errorf("%w: Slot %q must match %s", ErrInvalidConfig, slot, nameRe)
	case !nameRe.MatchString(publication):
		return fmt.Errorf("%w: Publication %q must match %s", ErrInvalidConfig, publication, nameRe)
	}
	for {
		var active bool
		err := pool.QueryRow(ctx, "SELECT active FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&active)
		if errors.Is(err, pgx.ErrNoRows) {
			break
		}
		if err != nil {
			return fmt.Errorf("cdc: remove: read slot %s: %w", slot, err)
		}
		if !active {
			if _, err := pool.Exec(ctx, "SELECT pg_drop_replication_slot($1)", slot); err == nil {
				break
			}
			// Taken again between the check and the drop: look again.
		}
		t := time.NewTimer(removePoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("cdc: remove: slot %s still in use: %w", slot, ctx.Err())
		case <-t.C:
		}
	}
	if _, err := pool.Exec(ctx, "DROP PUBLICATION IF EXISTS "+pgx.Identifier{publication}.Sanitize()); err != nil {
		return fmt.Errorf("cdc: remove: drop publication %s: %w", publication, err)
	}
	registry := pgx.Identifier{schema, "outbox_cdc_slots"}.Sanitize()
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", registry).Scan(&exists); err != nil {
		return fmt.Errorf("cdc: remove: find %s: %w", registry, err)
	}
	if exists {
		if _, err := pool.Exec(ctx, "DELETE FROM "+registry+" WHERE slot_name = $1", slot); err != nil {
			return fmt.Errorf("cdc: remove: forget slot %s: %w", slot, err)
		}
	}
	return nil
}

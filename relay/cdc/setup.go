package cdc

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
)

// slotState is a row of pg_replication_slots.
type slotState struct {
	exists   bool
	plugin   string
	database string
	// ourDatabase is the database the pool is connected to.
	ourDatabase string
	confirmed   string
	walStatus   string
	active      bool
}

// setup makes the database ready for streaming, as the active relay: the
// relay's tables, the publication, and the slot. It returns the slot's
// confirmed position, where the stream resumes.
func (r *Relay) setup(ctx context.Context) (pglogrepl.LSN, error) {
	if err := r.setupPublication(ctx); err != nil {
		return 0, err
	}
	slot, err := r.slotState(ctx)
	if err != nil {
		return 0, err
	}
	reg, err := r.registration(ctx)
	if err != nil {
		return 0, err
	}
	lost := slot.walStatus == "lost" || (reg.exists && !slot.exists)
	switch {
	case lost && !r.recreate.Load():
		return 0, r.slotLost(slot, reg)
	case lost:
		r.recreate.Store(false)
		return r.recreateSlot(ctx, slot)
	case !slot.exists:
		r.recreate.Store(false)
		return r.createFirstSlot(ctx)
	}
	r.recreate.Store(false)
	lsn, err := r.slotPosition(slot)
	if err != nil {
		return 0, err
	}
	if !reg.exists {
		if err := r.adoptSlot(ctx, lsn); err != nil {
			return 0, err
		}
	}
	return lsn, nil
}

// slotRegistration is the relay's record of its slot (outbox_cdc_slots).
type slotRegistration struct {
	exists bool
	lsn    string    // the position the slot was created at
	at     time.Time // when it was recorded
}

// registration reads the relay's record of its slot.
func (r *Relay) registration(ctx context.Context) (slotRegistration, error) {
	var reg slotRegistration
	err := r.cfg.Pool.QueryRow(ctx, r.q.registryGet, r.cfg.Slot).Scan(&reg.lsn, &reg.at)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return reg, fmt.Errorf("cdc: read the slot registry: %w", err)
	default:
		reg.exists = true
	}
	return reg, nil
}

// slotLost is the fatal error, wrapping [ErrSlotLost], for a slot that was
// recorded and is gone or invalidated, with the way to recover.
func (r *Relay) slotLost(slot slotState, reg slotRegistration) error {
	how := "is gone"
	if slot.exists {
		how = "was invalidated by PostgreSQL (wal_status lost, see max_slot_wal_keep_size)"
	}
	return fatal(fmt.Errorf("%w: slot %q, created at %s at %s, %s: the WAL since its last confirmed "+
		"position cannot be read. Events in that WAL are still in the outbox table unless they were deleted. "+
		"To recover: restart this relay with --recreate-slot (Config.RecreateSlot): it creates a new slot and "+
		"first publishes every unsent message of the table, in order per aggregate, through the table path; "+
		"or switch the outbox to claim mode (outbox mode set claim). See docs/cdc.md, \"Slot loss\"",
		ErrSlotLost, r.cfg.Slot, reg.lsn, reg.at.Format(time.RFC3339), how))
}

// createFirstSlot creates the slot, which did not exist and was not
// recorded: the messages unsent until now go through the table path.
func (r *Relay) createFirstSlot(ctx context.Context) (pglogrepl.LSN, error) {
	lsn, err := r.createSlot(ctx)
	if err != nil {
		return 0, err
	}
	r.log.Info("created the replication slot; messages unsent until now go through the table path",
		slog.String("consistent_lsn", lsn.String()))
	return lsn, nil
}

// recreateSlot drops the lost slot, if it is still there, and creates it
// again (Config.RecreateSlot): the unsent messages go through the table
// path.
func (r *Relay) recreateSlot(ctx context.Context, slot slotState) (pglogrepl.LSN, error) {
	if slot.exists {
		if _, err := r.cfg.Pool.Exec(ctx, r.q.slotDrop, r.cfg.Slot); err != nil {
			return 0, fmt.Errorf("cdc: drop the invalidated slot %s: %w", r.cfg.Slot, err)
		}
	}
	lsn, err := r.createSlot(ctx)
	if err != nil {
		return 0, err
	}
	r.log.Error("replication slot was lost and has been recreated (--recreate-slot): unsent messages go through the table path",
		slog.String("consistent_lsn", lsn.String()))
	return lsn, nil
}

// slotPosition checks that an existing slot is one the relay can stream
// from (pgoutput, on this database) and returns its confirmed position.
func (r *Relay) slotPosition(slot slotState) (pglogrepl.LSN, error) {
	if slot.plugin != "pgoutput" {
		return 0, fatal(fmt.Errorf("%w: slot %q exists with plugin %q, not pgoutput; choose another --slot",
			ErrNotReady, r.cfg.Slot, slot.plugin))
	}
	if slot.database != slot.ourDatabase {
		return 0, fatal(fmt.Errorf("%w: slot %q belongs to database %q, not %q; choose another --slot",
			ErrNotReady, r.cfg.Slot, slot.database, slot.ourDatabase))
	}
	lsn, err := pglogrepl.ParseLSN(slot.confirmed)
	if err != nil {
		return 0, fmt.Errorf("cdc: slot %s confirmed position %q: %w", r.cfg.Slot, slot.confirmed, err)
	}
	return lsn, nil
}

// adoptSlot registers an existing slot that is not registered: one made by
// someone else, or by a relay that died before it recorded it. What is
// unsent goes through the table path, since the slot may not hold it.
func (r *Relay) adoptSlot(ctx context.Context, lsn pglogrepl.LSN) error {
	if err := r.register(ctx, lsn); err != nil {
		return err
	}
	r.log.Warn("adopted an existing replication slot; messages unsent until now go through the table path")
	return nil
}

// setupLockKey is the advisory lock key that serialises the setup of one
// outbox's CDC objects.
func (r *Relay) setupLockKey() int64 {
	h := fnv.New64a()
	h.Write([]byte("outbox.cdc.setup:" + r.cfg.Schema))
	return int64(h.Sum64())
}

// beginSetup begins a transaction that holds the setup's advisory lock
// (setupLockKey) until it ends.
func (r *Relay) beginSetup(ctx context.Context) (pgx.Tx, error) {
	tx, err := r.cfg.Pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("cdc: setup: begin: %w", err)
	}
	if _, err := tx.Exec(ctx, r.q.setupLock, r.setupLockKey()); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("cdc: setup: lock: %w", err)
	}
	return tx, nil
}

// setupTables checks the server's settings and creates the relay's tables,
// under a transaction-scoped advisory lock. Every relay runs it, the
// standbys too, since the table path needs the tables.
func (r *Relay) setupTables(ctx context.Context) error {
	tx, err := r.beginSetup(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // a no-op after Commit
	var walLevel, keepSize string
	var tableExists bool
	if err := tx.QueryRow(ctx, r.q.settings, r.outboxTable).Scan(&walLevel, &keepSize, &tableExists); err != nil {
		return fmt.Errorf("cdc: setup: read settings: %w", err)
	}
	if walLevel != "logical" {
		return fatal(fmt.Errorf("%w: wal_level is %q; CDC needs logical (ALTER SYSTEM SET wal_level = logical, then restart PostgreSQL)",
			ErrNotReady, walLevel))
	}
	if !tableExists {
		// Not fatal: the relay waits for the migrations (see loop).
		if err := r.store.CheckMigrated(ctx); err != nil {
			return fmt.Errorf("cdc: setup: %w", err)
		}
		return fmt.Errorf("cdc: setup: table %s was created meanwhile; setting up again", r.outboxTable)
	}
	if keepSize == "-1" && !r.warnedKeep.Swap(true) {
		r.log.Warn("max_slot_wal_keep_size is unlimited: while no relay confirms positions, PostgreSQL keeps all WAL " +
			"for the slot until the disk is full; set a limit (ALTER SYSTEM SET max_slot_wal_keep_size = '50GB') " +
			"and watch the slot's lag")
	}
	if _, err := tx.Exec(ctx, r.q.setup); err != nil {
		return fmt.Errorf("cdc: setup: create tables: %w", err)
	}
	if _, err := tx.Exec(ctx, r.q.leaseSetup); err != nil {
		return fmt.Errorf("cdc: setup: create the lease table: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("cdc: setup: commit: %w", err)
	}
	r.tablesReady.Store(true)
	return nil
}

// setupPublication creates the publication if it is absent, and checks it
// if it exists. The active relay runs it before it streams.
//
// The publication publishes a partitioned outbox_messages through its root
// (publish_via_partition_root), so that the stream's inserts are rows of
// outbox_messages whichever partition holds them. An existing publication
// on a partitioned table without that option is altered; see viaRoot.
func (r *Relay) setupPublication(ctx context.Context) error {
	tx, err := r.beginSetup(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // a no-op after Commit
	var insert, more, viaRoot, partitioned, hasTable bool
	err = tx.QueryRow(ctx, r.q.publicationGet, r.cfg.Publication, r.cfg.Schema, r.outboxTable).
		Scan(&insert, &more, &viaRoot, &partitioned, &hasTable)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		if _, err := tx.Exec(ctx, r.q.publicationCreate); err != nil {
			return fmt.Errorf("cdc: setup: create publication %s: %w", r.cfg.Publication, err)
		}
		r.log.Info("created the publication", slog.String("publication", r.cfg.Publication),
			slog.Bool("partitioned", partitioned))
	case err != nil:
		return fmt.Errorf("cdc: setup: read publication %s: %w", r.cfg.Publication, err)
	case insert && partitioned && !viaRoot:
		if err := r.viaRoot(ctx, tx); err != nil {
			return err
		}
	case !insert || !hasTable:
		return r.notPublished()
	}
	if err == nil && more { // an existing publication
		r.log.Warn("the publication also publishes updates, deletes or truncates; the relay ignores them, "+
			"but they cost decoding work: recreate it WITH (publish = 'insert')", slog.String("publication", r.cfg.Publication))
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("cdc: setup: commit: %w", err)
	}
	return nil
}

// notPublished is the error for a publication that does not publish the
// inserts into the outbox table.
func (r *Relay) notPublished() error {
	return fatal(fmt.Errorf("%w: publication %q exists but does not publish inserts into %s; "+
		"drop it or choose another --publication", ErrNotReady, r.cfg.Publication, r.outboxTable))
}

// viaRoot sets publish_via_partition_root on an existing publication of a
// partitioned outbox_messages, in the setup transaction tx. Before, the
// stream delivered inserts into the partitions as rows of the partitions,
// which the reader does not take for messages: the WAL not yet confirmed
// may hold such inserts. So, with inserts blocked until tx commits, every
// aggregate with an unsent message is handed to the table path (as when a
// slot is created); messages committed after tx arrive as rows of
// outbox_messages.
func (r *Relay) viaRoot(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, r.q.lockInserts); err != nil {
		return fmt.Errorf("cdc: setup: lock %s: %w", r.outboxTable, err)
	}
	if _, err := tx.Exec(ctx, r.q.publicationViaRoot); err != nil {
		return fmt.Errorf("cdc: setup: alter publication %s: %w", r.cfg.Publication, err)
	}
	var insert, more, viaRoot, partitioned, hasTable bool
	if err := tx.QueryRow(ctx, r.q.publicationGet, r.cfg.Publication, r.cfg.Schema, r.outboxTable).
		Scan(&insert, &more, &viaRoot, &partitioned, &hasTable); err != nil {
		return fmt.Errorf("cdc: setup: read publication %s: %w", r.cfg.Publication, err)
	}
	if !hasTable {
		// It published some partitions only: not ours to widen.
		return r.notPublished()
	}
	tag, err := tx.Exec(ctx, r.q.deferUnsent)
	if err != nil {
		return fmt.Errorf("cdc: setup: defer unsent messages: %w", err)
	}
	r.log.Warn("the publication did not publish the partitioned outbox table through its root; "+
		"set publish_via_partition_root: messages unsent until now go through the table path",
		slog.String("publication", r.cfg.Publication), slog.Int64("aggregates", tag.RowsAffected()))
	return nil
}

func (r *Relay) slotState(ctx context.Context) (slotState, error) {
	var s slotState
	err := r.cfg.Pool.QueryRow(ctx, r.q.slotGet, r.cfg.Slot).Scan(&s.plugin, &s.database, &s.ourDatabase, &s.confirmed, &s.walStatus, &s.active)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return s, nil
	case err != nil:
		return s, fmt.Errorf("cdc: read slot %s: %w", r.cfg.Slot, err)
	}
	s.exists = true
	return s, nil
}

// createSlot creates the slot and records it, deferring every aggregate
// with an unsent message: the new slot's stream starts at its consistent
// point and does not hold what committed before.
func (r *Relay) createSlot(ctx context.Context) (pglogrepl.LSN, error) {
	var s string
	if err := r.cfg.Pool.QueryRow(ctx, r.q.slotCreate, r.cfg.Slot).Scan(&s); err != nil {
		return 0, fmt.Errorf("cdc: create slot %s: %w", r.cfg.Slot, err)
	}
	lsn, err := pglogrepl.ParseLSN(s)
	if err != nil {
		return 0, fmt.Errorf("cdc: create slot %s: position %q: %w", r.cfg.Slot, s, err)
	}
	if err := r.register(ctx, lsn); err != nil {
		return 0, err
	}
	return lsn, nil
}

// register records the slot and defers the aggregates with unsent
// messages, in one transaction. It is idempotent.
func (r *Relay) register(ctx context.Context, lsn pglogrepl.LSN) error {
	err := pgx.BeginFunc(ctx, r.cfg.Pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, r.q.deferUnsent)
		if err != nil {
			return fmt.Errorf("defer unsent messages: %w", err)
		}
		if n := tag.RowsAffected(); n > 0 {
			r.log.Info("aggregates with unsent messages handed to the table path", slog.Int64("aggregates", n))
		}
		if _, err := tx.Exec(ctx, r.q.registryPut, r.cfg.Slot, r.cfg.Publication, lsn.String(), r.cfg.ID); err != nil {
			return fmt.Errorf("record the slot: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cdc: register slot %s: %w", r.cfg.Slot, err)
	}
	return nil
}

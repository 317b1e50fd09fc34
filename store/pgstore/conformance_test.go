package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/relay/cursor"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
	"github.com/outbox-dev/outbox/store/storetest"
)

// TestConformance runs the suite every store must pass, each subtest in a
// PostgreSQL schema of its own.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness { return harness(setup(t)) })
}

// TestConformancePartitioned runs the same suite on a time-partitioned
// outbox table (Config.Partitioning): hourly partitions, the current one
// and three ahead, and the default partition.
func TestConformancePartitioned(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness { return harness(setupPartitioned(t, time.Hour)) })
}

// harness is the suite's view of b: its cursor strategy's Queue in cursor
// mode, else its Store.
func harness(b *bundle) storetest.Harness {
	var q store.Queue = b.store
	if b.cursor != nil {
		q = b.cursor
	}
	return storetest.Harness{
		Queue: q,
		Enqueue: func(ctx context.Context, msgs ...outbox.Message) error {
			return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
				return b.store.Enqueue(ctx, tx, msgs...)
			})
		},
		EnqueueRollback: func(ctx context.Context, msgs ...outbox.Message) error {
			tx, err := b.pool.Begin(ctx)
			if err != nil {
				return err
			}
			return errors.Join(b.store.Enqueue(ctx, tx, msgs...), tx.Rollback(ctx))
		},
		Get:             b.store.Get,
		ErrNotFound:     pgstore.ErrNotFound,
		Counts:          b.store.Counts,
		InsertUnchecked: b.insertUnchecked,
		Concurrent:      true,
	}
}

// setupCursor is setup with cfg, in cursor mode, with a cursor strategy
// of the store, as a Queue (b.cursor).
func setupCursor(t *testing.T, cfg pgstore.Config) *bundle {
	t.Helper()
	b := setup(t)
	cfg.Schema = b.schema
	if cfg.LeaderLease == 0 {
		// The tests of takeovers wait for the leader's lease: keep it short.
		cfg.LeaderLease = cursorLease
	}
	s, err := pgstore.New(b.pool, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := s.EnableCursor(testCtx(t)); err != nil {
		t.Fatalf("EnableCursor: %v", err)
	}
	b.store, b.cursor = s, cursor.New(s).Queue()
	return b
}

// newCursor returns a cursor strategy (as a Queue) of a new Store on b's
// pool and outbox, with cfg (its Schema set to b's): another relay.
func (b *bundle) newCursor(t *testing.T, cfg pgstore.Config) *cursor.Queue {
	t.Helper()
	cfg.Schema = b.schema
	s, err := pgstore.New(b.pool, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return cursor.New(s).Queue()
}

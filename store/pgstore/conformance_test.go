package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
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

// harness is the suite's view of b.
func harness(b *bundle) storetest.Harness {
	return storetest.Harness{
		Queue: b.store,
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
		Get:         b.store.Get,
		ErrNotFound: pgstore.ErrNotFound,
		Counts:      b.store.Counts,
		Concurrent:  true,
	}
}

package sqlitestore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/store/sqlitestore"
	"github.com/outbox-dev/outbox/store/storetest"
)

// TestConformance runs the suite every store must pass, each subtest on a
// database file of its own.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		b := setup(t)
		return storetest.Harness{
			Queue: b.store,
			Enqueue: func(ctx context.Context, msgs ...outbox.Message) error {
				return enqueue(ctx, b.db, b.store, msgs...)
			},
			EnqueueRollback: func(ctx context.Context, msgs ...outbox.Message) error {
				tx, err := b.db.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				return errors.Join(b.store.Enqueue(ctx, tx, msgs...), tx.Rollback())
			},
			Get:         b.store.Get,
			ErrNotFound: sqlitestore.ErrNotFound,
			Counts:      b.store.Counts,
			Cleanup:     b.store.Cleanup,
			InsertUnchecked: func(ctx context.Context, m outbox.Message, headers string) error {
				return insertUnchecked(ctx, b.db, m, headers)
			},
			Concurrent: true,
			Runs:       true,
		}
	})
}

package cursor_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/store/pgstore"
	"github.com/outbox-dev/outbox/store/storetest"
)

// TestConformanceCursor runs the suite every store must pass on the cursor
// strategy's Queue, on an outbox in cursor mode (EnableCursor): it leads
// the cursor and claims from its window.
func TestConformanceCursor(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		// Saving the position with every mark, so that Get shows a sent
		// message SENT at once.
		h := harness(setupCursor(t, pgstore.Config{CursorSaveInterval: -1}))
		h.ClaimsInMemory = true
		return h
	})
}

// harness is the suite's view of b: its cursor strategy's Queue.
func harness(b *bundle) storetest.Harness {
	return storetest.Harness{
		Queue: b.cursor,
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

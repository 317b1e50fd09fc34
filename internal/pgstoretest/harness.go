package pgstoretest

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
	"github.com/outbox-dev/outbox/store/storetest"
)

// Harness is the storetest suite's view of b: its cursor strategy's Queue
// in cursor mode, else its Store.
func (b *Bundle) Harness() storetest.Harness {
	var q store.Queue = b.Store
	if b.Cursor != nil {
		q = b.Cursor
	}
	return storetest.Harness{
		Queue: q,
		Enqueue: func(ctx context.Context, msgs ...outbox.Message) error {
			return pgx.BeginFunc(ctx, b.Pool, func(tx pgx.Tx) error {
				return b.Store.Enqueue(ctx, tx, msgs...)
			})
		},
		EnqueueRollback: func(ctx context.Context, msgs ...outbox.Message) error {
			tx, err := b.Pool.Begin(ctx)
			if err != nil {
				return err
			}
			return errors.Join(b.Store.Enqueue(ctx, tx, msgs...), tx.Rollback(ctx))
		},
		Get:             b.Store.Get,
		ErrNotFound:     pgstore.ErrNotFound,
		Counts:          b.Store.Counts,
		InsertUnchecked: b.InsertUnchecked,
		Concurrent:      true,
		// The cursor strategy's claims are of heads only.
		Runs: b.Cursor == nil,
	}
}

package inbox

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Cleanup deletes the ids of messages processed longer than
// Config.Retention ago, in batches of at most Config.CleanupBatchSize, each
// its own short statement, until none is left; it returns how many it
// deleted. Run it periodically (daily is plenty), from any number of
// instances. Parked messages are not touched.
//
// A message delivered again after its id was deleted is applied again: see
// Config.Retention.
func (i *Inbox) Cleanup(ctx context.Context) (int64, error) {
	return cleanup(ctx, i.log, i.cfg.Retention, i.cfg.CleanupBatchSize, func(ctx context.Context) (int64, error) {
		tag, err := i.pool.Exec(ctx, i.q.cleanup, i.cfg.Retention.Microseconds(), i.cfg.CleanupBatchSize)
		return tag.RowsAffected(), err
	})
}

// cleanup is Cleanup on any database: it runs deleteBatch, which deletes at
// most batch ids older than retention, until a batch deletes fewer.
func cleanup(ctx context.Context, log *slog.Logger, retention time.Duration, batch int,
	deleteBatch func(context.Context) (int64, error)) (int64, error) {
	var total int64
	for {
		n, err := deleteBatch(ctx)
		if err != nil {
			return total, fmt.Errorf("inbox: cleanup: %w", err)
		}
		total += n
		if n < int64(batch) {
			break
		}
	}
	if total > 0 {
		log.Info("inbox: cleanup deleted processed ids", slog.Int64("deleted", total),
			slog.Duration("retention", retention))
	}
	return total, nil
}

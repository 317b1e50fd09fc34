package inbox

import (
	"context"
	"fmt"
	"log/slog"
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
	var total int64
	for {
		tag, err := i.pool.Exec(ctx, i.q.cleanup, i.cfg.Retention.Microseconds(), i.cfg.CleanupBatchSize)
		if err != nil {
			return total, fmt.Errorf("inbox: cleanup: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(i.cfg.CleanupBatchSize) {
			break
		}
	}
	if total > 0 {
		i.log.Info("inbox: cleanup deleted processed ids", slog.Int64("deleted", total),
			slog.Duration("retention", i.cfg.Retention))
	}
	return total, nil
}

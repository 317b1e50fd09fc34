package sqlitestore

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Cleanup deletes SENT messages published at least olderThan ago, oldest
// first, in batches of at most batch rows, and returns how many it deleted.
// Each batch is a write transaction of its own, so the application's
// writers wait at most one batch long for the lock; between batches Cleanup
// checks ctx. Messages in any other status (PENDING, IN_FLIGHT, FAILED,
// DEAD_LETTER) are never deleted. SQLite reuses the freed pages for new
// rows; the file itself shrinks only with VACUUM.
//
// olderThan must not be negative and batch must be at least 1.
func (s *Store) Cleanup(ctx context.Context, olderThan time.Duration, batch int) (int64, error) {
	if olderThan < 0 {
		return 0, fmt.Errorf("sqlitestore: cleanup: olderThan %v must not be negative", olderThan)
	}
	if batch < 1 {
		return 0, fmt.Errorf("sqlitestore: cleanup: batch %d must be at least 1", batch)
	}
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("sqlitestore: cleanup: %w", err)
		}
		n, err := s.exec(ctx, s.q.cleanup, olderThan.Milliseconds(), batch)
		if err != nil {
			return total, fmt.Errorf("sqlitestore: cleanup: %w", err)
		}
		total += n
		if n < int64(batch) {
			break
		}
	}
	if total > 0 {
		s.cfg.Logger.Info("deleted sent outbox messages", slog.Int64("deleted", total),
			slog.Duration("older_than", olderThan), slog.String("table_prefix", s.cfg.TablePrefix))
	}
	return total, nil
}

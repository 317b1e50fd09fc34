package inbox

import (
	"context"
	"fmt"
)

// CleanupBatch runs one batch statement of Cleanup for the rows named what
// ("processed ids", "replayed parked messages" or "parked messages never
// replayed") and returns the rows it deleted.
func (i *Inbox) CleanupBatch(ctx context.Context, what string) (int64, error) {
	return cleanupOnce(ctx, i.cleanupSteps(), what, i.cleanupBatch)
}

// CleanupBatch is Inbox.CleanupBatch for SQLite.
func (i *SQLiteInbox) CleanupBatch(ctx context.Context, what string) (int64, error) {
	return cleanupOnce(ctx, i.cleanupSteps(), what, i.cleanupBatch)
}

func cleanupOnce(ctx context.Context, steps []cleanupStep, what string,
	deleteBatch func(context.Context, cleanupStep) (int64, error)) (int64, error) {
	for _, step := range steps {
		if step.what == what {
			return deleteBatch(ctx, step)
		}
	}
	return 0, fmt.Errorf("no cleanup step %q", what)
}

package inbox

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Cleanup deletes, in batches of at most Config.CleanupBatchSize, each its
// own short statement, until none is left:
//
//   - the ids of messages processed longer than Config.Retention ago;
//   - parked messages replayed longer than Config.ReplayedRetention ago;
//   - with Config.ParkedRetention set, parked messages never replayed that
//     were parked longer than that ago (logged as a warning: their
//     messages were never applied).
//
// It returns how many rows it deleted in all. Run it periodically (daily is
// plenty), from any number of instances.
//
// A message delivered again after its id was deleted is applied again: see
// Config.Retention.
func (i *Inbox) Cleanup(ctx context.Context) (int64, error) {
	return cleanup(ctx, i.log, i.cfg.CleanupBatchSize, i.cleanupSteps(), i.cleanupBatch)
}

// cleanupSteps are the kinds of rows Inbox.Cleanup deletes.
func (i *Inbox) cleanupSteps() []cleanupStep {
	return newCleanupSteps(i.q, i.cfg.Retention, i.cfg.ReplayedRetention, i.cfg.ParkedRetention)
}

// cleanupBatch runs one batch statement of step and returns the rows it
// deleted.
func (i *Inbox) cleanupBatch(ctx context.Context, step cleanupStep) (int64, error) {
	tag, err := i.pool.Exec(ctx, step.query, step.age.Microseconds(), i.cfg.CleanupBatchSize)
	return tag.RowsAffected(), err
}

// cleanupStep is one kind of row that Cleanup deletes once older than age:
// query deletes one batch of them.
type cleanupStep struct {
	what  string // what the rows are, for logs and errors
	query string
	age   time.Duration // 0: none are deleted
	// lost marks rows whose deletion gives up messages never applied.
	lost bool
}

// newCleanupSteps returns the steps of Cleanup for an inbox's queries and
// retentions.
func newCleanupSteps(q queries, retention, replayed, parked time.Duration) []cleanupStep {
	return []cleanupStep{
		{what: "processed ids", query: q.cleanup, age: retention},
		{what: "replayed parked messages", query: q.cleanupReplayed, age: replayed},
		{what: "parked messages never replayed", query: q.cleanupParked, age: parked, lost: true},
	}
}

// cleanup is Cleanup on any database: for each step, it runs deleteBatch
// until a batch deletes fewer than batch rows.
func cleanup(ctx context.Context, log *slog.Logger, batch int, steps []cleanupStep,
	deleteBatch func(context.Context, cleanupStep) (int64, error)) (int64, error) {
	var total int64
	for _, step := range steps {
		if step.age == 0 {
			continue
		}
		var deleted int64
		for {
			n, err := deleteBatch(ctx, step)
			if err != nil {
				return total + deleted, fmt.Errorf("inbox: cleanup of %s: %w", step.what, err)
			}
			deleted += n
			if n < int64(batch) {
				break
			}
		}
		total += deleted
		if deleted == 0 {
			continue
		}
		level := slog.LevelInfo
		if step.lost {
			level = slog.LevelWarn
		}
		log.Log(ctx, level, "inbox: cleanup deleted "+step.what, slog.Int64("deleted", deleted),
			slog.Duration("older_than", step.age))
	}
	return total, nil
}

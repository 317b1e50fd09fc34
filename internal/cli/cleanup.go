package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/outbox-dev/outbox/ops"
)

func newCleanupCommand(a *app) *cobra.Command {
	var (
		olderThan, every time.Duration
		batchSize        int
		pause            time.Duration
		includeDiscarded bool
		actor            string
		asJSON           bool
	)
	cmd := &cobra.Command{
		Use:     "cleanup --older-than AGE",
		GroupID: "operate",
		Short:   "Delete SENT events older than a retention period, in small batches",
		Long: `cleanup deletes SENT events published more than --older-than ago (7d, 36h,
...), with their attempt history, oldest first, in batches of at most
--batch-size rows. Each batch is a short transaction of its own that locks
only the rows it deletes, so relays keep publishing while it runs.

It never deletes PENDING, IN_FLIGHT, FAILED or DEAD_LETTER events.
DISCARDED events are kept for audit unless --include-discarded, which
deletes those discarded more than --older-than ago.

With --every it runs now and then at that interval until SIGINT/SIGTERM,
as a retention job beside the relay. Each run that deletes something is
recorded in the audit log.

Keep the retention longer than the longest 'outbox replay' you may need:
deleted events cannot be replayed. See docs/operations.md for autovacuum
settings that keep the table compact.`,
		Example: `  outbox cleanup --older-than 7d
  outbox cleanup --older-than 30d --include-discarded --pause 100ms
  outbox cleanup --older-than 7d --every 1h`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			switch {
			case !changed(cmd.Flags(), "older-than"):
				return flagError("older-than", "is required: how long SENT events are kept, such as 7d")
			case olderThan < ops.MinCleanupAge:
				return flagError("older-than", "must be at least %s, not %s", formatAge(ops.MinCleanupAge), formatAge(olderThan))
			case batchSize < 1:
				return flagError("batch-size", "must be at least 1, not %d", batchSize)
			case pause < 0:
				return flagError("pause", "must not be negative, not %s", pause)
			case every < 0:
				return flagError("every", "must not be negative, not %s", formatAge(every))
			}
			o, pool, err := a.openOps(ctx, "cleanup", ops.Config{})
			if err != nil {
				return err
			}
			defer pool.Close()
			cfg := ops.CleanupConfig{OlderThan: olderThan, BatchSize: batchSize, Pause: pause,
				IncludeDiscarded: includeDiscarded, Actor: actor}
			if every > 0 {
				if err := o.CleanupEvery(ctx, cfg, every); err != nil && !errors.Is(err, ctx.Err()) {
					return err
				}
				return nil
			}
			res, err := o.Cleanup(ctx, cfg)
			if asJSON {
				if jerr := writeJSON(a.stdout, cleanupJSON{res.Cutoff, res.Sent, res.Discarded, res.Batches}); jerr != nil {
					return jerr
				}
			} else {
				fmt.Fprintf(a.stdout, "deleted %d SENT", res.Sent)
				if includeDiscarded {
					fmt.Fprintf(a.stdout, " and %d DISCARDED", res.Discarded)
				}
				fmt.Fprintf(a.stdout, " message(s) older than %s in %d batch(es)\n", res.Cutoff.UTC().Format(time.RFC3339), res.Batches)
			}
			return err
		},
	}
	fs := cmd.Flags()
	fs.Var(ageValue{&olderThan}, "older-than", "delete SENT events published longer ago than this `age`: 7d, 36h, 90m (required)")
	fs.IntVar(&batchSize, "batch-size", ops.DefaultCleanupBatchSize, "most rows one DELETE removes")
	fs.DurationVar(&pause, "pause", 0, "sleep between batches, to spread the load")
	fs.BoolVar(&includeDiscarded, "include-discarded", false, "also delete DISCARDED events discarded longer ago than --older-than")
	fs.Var(ageValue{&every}, "every", "run at this `interval` until stopped, instead of once")
	fs.StringVar(&actor, "actor", "", actorFlagUsage)
	fs.BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

type cleanupJSON struct {
	Cutoff    time.Time `json:"cutoff"`
	Sent      int64     `json:"sent"`
	Discarded int64     `json:"discarded"`
	Batches   int       `json:"batches"`
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/outbox-dev/outbox/ops"
	"github.com/outbox-dev/outbox/store/pgstore"
)

func newCleanupCommand(a *app) *cobra.Command {
	var (
		olderThan, every time.Duration
		batchSize        int
		pause            time.Duration
		includeDiscarded bool
		actor            string
		asJSON           bool
		partitions       bool
		ahead            int
	)
	cmd := &cobra.Command{
		Use:     "cleanup --older-than AGE",
		GroupID: "operate",
		Short:   "Delete SENT events older than a retention period, in small batches",
		Long: `cleanup deletes SENT events published more than --older-than ago (7d, 36h,
...), with their attempt history, oldest first, in batches of at most
--batch-size rows. Each batch is a short transaction of its own that locks
only the rows it deletes, so relays keep publishing while it runs.

In cursor mode ('outbox cursor') it also deletes the QUEUED events the
cursor passed (they are SENT) that were created more than --older-than
ago: they have no publish time. It walks them in seq order from the oldest,
--batch-size rows at a time, stops at the first event created after the
cutoff, and never touches an event above the cursor's position.

It never deletes PENDING, IN_FLIGHT, FAILED or DEAD_LETTER events.
DISCARDED events are kept for audit unless --include-discarded, which
deletes those discarded more than --older-than ago.

With --every it runs now and then at that interval until SIGINT/SIGTERM,
as a retention job beside the relay. Each run that deletes something is
recorded in the audit log.

With --partitions, on an outbox made by 'outbox migrate --partitioned', it
drops whole partitions instead of deleting rows: every partition whose time
range ended more than --older-than ago, unless it still holds an unsent
message (a QUEUED one above the cursor's position included), a dead letter or (without --include-discarded) a discarded one,
which it keeps and names with the reason. It also creates the partitions up
to --partitions-ahead intervals ahead. Run it at least once per partition
interval (--every 1h), or let the relay do it (--cleanup-older-than).

Keep the retention longer than the longest 'outbox replay' you may need:
deleted events cannot be replayed. See docs/operations.md for autovacuum
settings that keep the table compact.`,
		Example: `  outbox cleanup --older-than 7d
  outbox cleanup --older-than 30d --include-discarded --pause 100ms
  outbox cleanup --older-than 7d --every 1h
  outbox cleanup --partitions --older-than 7d --every 1h`,
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
			if !partitions && changed(cmd.Flags(), "partitions-ahead") {
				return flagError("partitions", "is required with --partitions-ahead")
			}
			if ahead < 0 {
				return flagError("partitions-ahead", "must not be negative, not %d", ahead)
			}
			o, pool, err := a.openOps(ctx, "cleanup", ops.Config{})
			if err != nil {
				return err
			}
			defer pool.Close()
			if partitions {
				return a.cleanupPartitions(ctx, o, ops.PartitionConfig{OlderThan: olderThan, Ahead: ahead,
					IncludeDiscarded: includeDiscarded, Actor: actor}, every, asJSON)
			}
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
				if jerr := writeJSON(a.stdout, cleanupJSON{res.Cutoff, res.Sent, res.Queued, res.Discarded, res.Batches}); jerr != nil {
					return jerr
				}
			} else {
				fmt.Fprintf(a.stdout, "deleted %d SENT", res.Sent)
				if includeDiscarded {
					fmt.Fprintf(a.stdout, " and %d DISCARDED", res.Discarded)
				}
				fmt.Fprintf(a.stdout, " message(s) older than %s in %d batch(es)\n", res.Cutoff.UTC().Format(time.RFC3339), res.Batches)
				if res.Queued > 0 {
					fmt.Fprintf(a.stdout, "%d of the SENT message(s) were QUEUED ones the cursor had passed, aged by when they were created\n", res.Queued)
				}
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
	fs.BoolVar(&partitions, "partitions", false, "drop whole partitions of a partitioned outbox instead of deleting rows, and create partitions ahead")
	fs.IntVar(&ahead, "partitions-ahead", pgstore.DefaultPartitionsAhead, "partitions to keep created after the current one (with --partitions)")
	return cmd
}

// cleanupPartitions is "cleanup --partitions": once, or every interval.
func (a *app) cleanupPartitions(ctx context.Context, o *ops.Ops, cfg ops.PartitionConfig, every time.Duration, asJSON bool) error {
	if every > 0 {
		if err := o.MaintainPartitionsEvery(ctx, cfg, every); err != nil && !errors.Is(err, ctx.Err()) {
			return err
		}
		return nil
	}
	res, err := o.MaintainPartitions(ctx, cfg)
	if errors.Is(err, pgstore.ErrNotPartitioned) {
		return fmt.Errorf("%w; create it with 'outbox migrate --partitioned', or drop --partitions to delete rows", err)
	}
	if asJSON {
		out := partitionsJSON{Cutoff: res.Cutoff, Created: res.Created, DroppedRows: res.DroppedRows,
			Dropped: []string{}, Kept: []keptJSON{}}
		for _, p := range res.Dropped {
			out.Dropped = append(out.Dropped, p.Name)
		}
		for _, k := range res.Kept {
			out.Kept = append(out.Kept, keptJSON{k.Name, k.Reason, k.Unsent, k.DeadLetters, k.Discarded})
		}
		if out.Created == nil {
			out.Created = []string{}
		}
		if jerr := writeJSON(a.stdout, out); jerr != nil {
			return jerr
		}
		return err
	}
	for _, name := range res.Created {
		fmt.Fprintf(a.stdout, "created partition %s\n", termSafe(name))
	}
	for _, p := range res.Dropped {
		fmt.Fprintf(a.stdout, "dropped partition %s (created before %s)\n", termSafe(p.Name), p.To.UTC().Format(time.RFC3339))
	}
	for _, k := range res.Kept {
		fmt.Fprintf(a.stdout, "kept partition %s: %s\n", termSafe(k.Name), termSafe(k.Reason))
	}
	fmt.Fprintf(a.stdout, "%d partition(s) created, %d dropped (about %d rows), %d kept past the cutoff %s\n",
		len(res.Created), len(res.Dropped), res.DroppedRows, len(res.Kept), res.Cutoff.UTC().Format(time.RFC3339))
	return err
}

type partitionsJSON struct {
	Cutoff      time.Time  `json:"cutoff"`
	Created     []string   `json:"created"`
	Dropped     []string   `json:"dropped"`
	DroppedRows int64      `json:"droppedRowsEstimated"`
	Kept        []keptJSON `json:"kept"`
}

type keptJSON struct {
	Name        string `json:"name"`
	Reason      string `json:"reason"`
	Unsent      int64  `json:"unsent"`
	DeadLetters int64  `json:"deadLetters"`
	Discarded   int64  `json:"discarded"`
}

type cleanupJSON struct {
	Cutoff time.Time `json:"cutoff"`
	Sent   int64     `json:"sent"`
	// Queued is the part of Sent that the cursor had passed (cursor mode).
	Queued    int64 `json:"queued"`
	Discarded int64 `json:"discarded"`
	Batches   int   `json:"batches"`
}

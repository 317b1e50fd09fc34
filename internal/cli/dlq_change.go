package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/outbox-dev/outbox/ops"
)

// dlqChangeFlags are the flags of replay and discard.
type dlqChangeFlags struct {
	filter        dlqFilterFlags
	all           bool
	reason, actor string
	batchSize     int
	rate          float64
}

func (c *dlqChangeFlags) add(fs *pflag.FlagSet, reasonUsage string) {
	c.filter.add(fs, 0)
	c.filter.addGroup(fs)
	fs.IntVar(&c.batchSize, "batch-size", ops.DefaultDeadLetterBatchSize, "with --group or a filter: most messages changed in one transaction, each with its audit entry")
	fs.Float64Var(&c.rate, "rate", ops.DefaultDeadLetterRate, "with --group or a filter: most messages changed per second, so that a large group loads neither the database nor the relay at once (0: no limit)")
	fs.StringVar(&c.reason, "reason", "", reasonUsage)
	fs.StringVar(&c.actor, "actor", "", actorFlagUsage)
}

// request builds the ops.Request for the ids in args or the filter flags,
// which exclude each other; verb names the operation in errors.
func (c *dlqChangeFlags) request(args []string, verb string) (ops.Request, error) {
	req := ops.Request{Actor: c.actor, Reason: c.reason, BatchSize: c.batchSize, Rate: c.rate}
	filtered := c.all || c.filter.selects()
	switch {
	case c.batchSize < 1:
		return req, flagError("batch-size", "must be at least 1, not %d", c.batchSize)
	case c.rate < 0:
		return req, flagError("rate", "must not be negative (0: no limit), not %v", c.rate)
	case len(args) > 0 && filtered:
		return req, &usageError{fmt.Errorf("give either message ids or --group or filter flags, not both")}
	case len(args) > 0:
		ids, err := parseIDs(args)
		req.IDs = ids
		return req, err
	case !filtered:
		return req, &usageError{fmt.Errorf("give the ids of the dead letters to %s, or select them with --group or a filter flag", verb)}
	}
	if c.rate == 0 {
		req.Rate = -1
	}
	f, err := c.filter.filter()
	f.All = c.all
	req.Filter = &f
	return req, err
}

func newDLQReplayCommand(a *app) *cobra.Command {
	var c dlqChangeFlags
	cmd := &cobra.Command{
		Use:   "replay [ID...]",
		Short: "Put dead letters back to PENDING (attempts reset) so the relay publishes them",
		Long: `replay puts dead letters back to PENDING, due at once and with their
attempts reset to 0. That unblocks their aggregates: the relay publishes
each one and then the messages behind it, in order, within its poll
interval.

Name the messages by id: every one must be a dead letter, or nothing is
changed, and the change and its audit entry (--actor, --reason) commit
together. Or select them with --group KEY (a group of 'outbox dlq list
--group'), the filter flags, or --all for every dead letter: those that are
dead letters when it starts are replayed in batches of --batch-size, each
committed with its audit entry, at most --rate per second. The order of
each aggregate holds across batches: a replayed message behind a dead
letter of its aggregate not yet replayed waits for it.

Fix the cause first (create the topic, grant the ACL, deploy the fix):
a replayed message that fails again goes through its retries once more.`,
		Example: `  outbox dlq replay 0190a1c2-7f3e-7c2a-9d4e-1b2c3d4e5f60 --reason "topic orders created"
  outbox dlq replay --group 3f9a2c1b07d4e5a6 --reason "max.message.bytes raised"
  outbox dlq replay --aggregate-type Order --since 2026-03-01 --reason "ACL fixed"
  outbox dlq replay --all --reason "broker quota raised"`,
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := c.request(args, "replay")
			if err != nil {
				return err
			}
			return a.changeDeadLetters(cmd.Context(), "replayed", req, (*ops.Ops).Replay)
		},
	}
	c.add(cmd.Flags(), "why, for the audit log")
	cmd.Flags().BoolVar(&c.all, "all", false, "replay every dead letter (narrowed by any filter flag given)")
	return cmd
}

func newDLQDiscardCommand(a *app) *cobra.Command {
	var c dlqChangeFlags
	cmd := &cobra.Command{
		Use:   "discard [ID...] --reason TEXT",
		Short: "Give up on dead letters: DISCARDED, kept for audit; their aggregates flow again",
		Long: `discard marks dead letters DISCARDED: they are never published, stay in the
table for audit (until 'outbox cleanup --include-discarded'), and no longer
block their aggregates, so the relay publishes the messages behind them.

Name the messages by id: every one must be a dead letter, or nothing is
changed. Or select them with --group KEY (a group of 'outbox dlq list
--group') or the filter flags: they are discarded in batches of
--batch-size, each committed with its audit entry, at most --rate per
second. --reason is required; it is recorded with --actor in the audit log.`,
		Example: `  outbox dlq discard 0190a1c2-7f3e-7c2a-9d4e-1b2c3d4e5f60 --reason "payload invalid; order re-sent as a new event"
  outbox dlq discard --group 3f9a2c1b07d4e5a6 --reason "test events from the load test"`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(c.reason) == "" {
				return flagError("reason", "is required: say why these events are never published")
			}
			req, err := c.request(args, "discard")
			if err != nil {
				return err
			}
			return a.changeDeadLetters(cmd.Context(), "discarded", req, (*ops.Ops).Discard)
		},
	}
	c.add(cmd.Flags(), "why these events are never published (required; kept in the audit log)")
	return cmd
}

// progressEvery is how often a change by group or filter reports its
// progress.
const progressEvery = 5 * time.Second

// changeDeadLetters runs op (Replay or Discard) with req and prints what it
// changed, also when it stopped part way.
func (a *app) changeDeadLetters(ctx context.Context, verb string, req ops.Request,
	op func(*ops.Ops, context.Context, ops.Request) (ops.Result, error)) error {
	o, pool, err := a.openOps(ctx, "dlq", ops.Config{})
	if err != nil {
		return err
	}
	defer pool.Close()
	if req.Filter != nil {
		var done int
		last := time.Now()
		req.OnBatch = func(r ops.Result) {
			done += len(r.IDs)
			if time.Since(last) >= progressEvery {
				last = time.Now()
				a.logger.Info("dead letters "+verb+" so far", "messages", done)
			}
		}
	}
	res, err := op(o, ctx, req)
	if err != nil && len(res.IDs) == 0 {
		return err
	}
	printResult(a.stdout, verb, res)
	return err
}

// maxIDsPrinted bounds the message ids printResult lists.
const maxIDsPrinted = 20

func printResult(w io.Writer, verb string, res ops.Result) {
	switch n := len(res.AuditIDs); {
	case n <= 1:
		fmt.Fprintf(w, "%s %d message(s) (audit entry %d)\n", verb, len(res.IDs), res.AuditID)
	default:
		fmt.Fprintf(w, "%s %d message(s) in %d transactions (audit entries %d to %d)\n", verb, len(res.IDs), n,
			res.AuditIDs[0], res.AuditIDs[n-1])
	}
	for i, id := range res.IDs {
		if i == maxIDsPrinted {
			fmt.Fprintf(w, "  ... and %d more (the audit entries list them all)\n", len(res.IDs)-i)
			break
		}
		fmt.Fprintf(w, "  %s\n", id)
	}
}

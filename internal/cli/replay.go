package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/outbox-dev/outbox/ops"
)

func newReplayCommand(a *app) *cobra.Command {
	var (
		kf                       kafkaFlags
		since, name              string
		aggregateType, eventType string
		rate                     float64
		batchSize                int
		restart                  bool
		reason, actor            string
	)
	cmd := &cobra.Command{
		Use:     "replay --since TIME",
		GroupID: "operate",
		Short:   "Publish already SENT events again, to rebuild a consumer",
		Long: `replay publishes SENT events again, for a consumer that must rebuild its
state (a new service, a lost database, a fixed bug): those created since
--since, optionally only of one --aggregate-type and --event-type, up to the
newest event when the replay first started (newer ones are the relay's).

Each event goes out with its original event id (the eventId header) and
the same key, headers and topic routing as the relay uses, in enqueue
order, so per-aggregate order holds. Consumers that deduplicate by eventId
(package inbox) therefore stay correct: one that already processed an event
skips it, one rebuilding from nothing processes each once. The outbox rows
are not changed.

It is rate limited (--rate events per second) and resumable: progress is
saved after every batch under --name (by default a name derived from the
selection, printed at the start), so running the same command again after
a crash or Ctrl-C continues where it stopped. --restart starts over.
Events that 'outbox cleanup' already deleted cannot be replayed. In cursor
mode the QUEUED events the cursor passed are SENT and are replayed; those
above its position are not sent yet and are left to the relay.

--since is a fixed time (RFC 3339 or a date), not an age, so that a
resumed run selects the same events. Every run is recorded in the audit
log.`,
		Example: `  # Rebuild the billing service's state from the last week of Order events:
  outbox replay --since 2026-03-01 --aggregate-type Order --name rebuild-billing --rate 1000 \
      --kafka-brokers kafka-1:9092 --topic-route Order=orders`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if since == "" {
				return flagError("since", "is required")
			}
			t, err := parseTime(since, time.Now(), false)
			if err != nil {
				return flagError("since", "%v", err)
			}
			if rate <= 0 {
				return flagError("rate", "must be positive, not %v", rate)
			}
			if batchSize < 1 {
				return flagError("batch-size", "must be at least 1, not %d", batchSize)
			}
			if name == "" {
				name = defaultReplayName(t, aggregateType, eventType)
			}
			if _, err := kf.config(a.logger); err != nil {
				return err
			}
			o, pool, err := a.openOps(ctx, "replay", ops.Config{})
			if err != nil {
				return err
			}
			defer pool.Close()
			snk, err := kf.newSink(a.logger, 1)
			if err != nil {
				return err
			}
			defer func() {
				if err := snk.Close(); err != nil {
					a.logger.Warn("closing the Kafka client", slog.Any("error", err))
				}
			}()
			fmt.Fprintf(a.stdout, "replay %s: events since %s", termSafe(name), t.UTC().Format(time.RFC3339Nano))
			if aggregateType != "" {
				fmt.Fprintf(a.stdout, ", aggregate type %s", termSafe(aggregateType))
			}
			if eventType != "" {
				fmt.Fprintf(a.stdout, ", event type %s", termSafe(eventType))
			}
			fmt.Fprintf(a.stdout, ", at most %v/s\n", rate)
			p, err := o.Republish(ctx, ops.RepublishConfig{
				Name: name, Since: t, AggregateType: aggregateType, EventType: eventType,
				Rate: rate, BatchSize: batchSize, Restart: restart, Actor: actor, Reason: reason,
			}, snk)
			fmt.Fprintf(a.stdout, "replay %s: published %d now, %d in all, up to seq %d of %d", termSafe(name), p.ThisRun, p.Published, p.LastSeq, p.UntilSeq)
			if p.Finished {
				fmt.Fprintln(a.stdout, "; finished")
			} else {
				fmt.Fprintf(a.stdout, "; not finished: run the same command again to continue\n")
			}
			if err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("replay %s stopped: %w", name, ctx.Err())
				}
				return err
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&since, "since", "", "replay events created at or after `time`: RFC 3339 (2026-03-01T12:00:00Z) or a date (2026-03-01, midnight UTC)")
	fs.StringVar(&name, "name", "", "`name` of the resumable run (default: derived from --since, --aggregate-type and --event-type)")
	fs.StringVar(&aggregateType, "aggregate-type", "", "only events of this aggregate `type`")
	fs.StringVar(&eventType, "event-type", "", "only events of this event `type`")
	fs.Float64Var(&rate, "rate", ops.DefaultRepublishRate, "most events published per second")
	fs.IntVar(&batchSize, "batch-size", ops.DefaultRepublishBatchSize, "most events read and published at once")
	fs.BoolVar(&restart, "restart", false, "forget the saved progress of --name and start over")
	fs.StringVar(&reason, "reason", "", "why, for the audit log")
	fs.StringVar(&actor, "actor", "", actorFlagUsage)
	addKafkaFlags(fs, &kf)
	return cmd
}

// defaultReplayName names a replay by its selection, so that the same
// command resumes the same run.
func defaultReplayName(since time.Time, aggregateType, eventType string) string {
	h := sha256.Sum256([]byte(since.UTC().Format(time.RFC3339Nano) + "\x00" + aggregateType + "\x00" + eventType))
	return "replay-" + hex.EncodeToString(h[:6])
}

package cli

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/relay/modes"
	"github.com/outbox-dev/outbox/relay/strategy"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/sink/kafka"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// kafkaPingTimeout bounds the check, at start, that a broker answers.
const kafkaPingTimeout = 5 * time.Second

// relayFlags are the flags that mirror relay.Config. A command that runs a
// relay adds them with addRelayFlags.
type relayFlags struct {
	id                    string
	batchSize             int
	maxRun                int
	maxRunBytes           int
	workers               int
	lease                 time.Duration
	publishTimeout        time.Duration
	pollInterval          time.Duration
	linger                time.Duration
	lingerAbove           float64
	noListen              bool
	maxAttempts           int
	retryBase             time.Duration
	retryMax              time.Duration
	unavailableBackoffMax time.Duration
	shutdownTimeout       time.Duration
}

func addRelayFlags(fs *pflag.FlagSet, r *relayFlags) {
	fs.StringVar(&r.id, "relay-id", "", "`name` of this relay instance in leases and logs (default <hostname>-<pid>-<random>)")
	fs.IntVar(&r.batchSize, "batch-size", relay.DefaultBatchSize, "most messages one claim takes")
	fs.IntVar(&r.maxRun, "max-run", relay.DefaultMaxRun, "most consecutive messages of one aggregate a claim takes together and publishes in one call (a run), at most --batch-size; 1 claims one message per aggregate per batch")
	fs.IntVar(&r.maxRunBytes, "max-run-bytes", relay.DefaultMaxRunBytes, "most payload `bytes` of a run: a later message joins its aggregate's run only while the run stays within it (the first comes whatever its size)")
	fs.IntVar(&r.workers, "workers", relay.DefaultWorkers, "claim-publish-mark loops running at once")
	fs.DurationVar(&r.lease, "lease", relay.DefaultLease, "how long a claim holds its messages; a crashed relay's messages are claimable again after it (at least 1s)")
	fs.DurationVar(&r.publishTimeout, "publish-timeout", 0, "bound on the wait for the broker's acks of one batch; shorter than --lease (default --lease/2)")
	fs.DurationVar(&r.pollInterval, "poll-interval", relay.DefaultPollInterval, "how often to look for due messages when not woken by a notification")
	fs.DurationVar(&r.linger, "linger", relay.DefaultLinger, "the longest wait, after publishing a batch smaller than --batch-size, before marking it and claiming the next, so that claims take more messages per round trip: less database work under load, more latency. The wait grows with the claim rate, from nothing at --linger-above messages/s to this at twice that (0: claim again at once)")
	fs.Float64Var(&r.lingerAbove, "linger-above", relay.DefaultLingerAbove, "linger only while the relay claims more than this many `messages/s`, the longer the more (0: linger --linger at any rate)")
	fs.BoolVar(&r.noListen, "no-listen", false, "do not use LISTEN/NOTIFY wake-ups (for poolers in transaction mode); rely on --poll-interval")
	fs.IntVar(&r.maxAttempts, "max-attempts", relay.DefaultMaxAttempts, "failed attempts after which a message becomes DEAD_LETTER")
	fs.DurationVar(&r.retryBase, "retry-base", relay.DefaultRetryBase, "delay before the first retry; it doubles with each attempt, with jitter")
	fs.DurationVar(&r.retryMax, "retry-max", relay.DefaultRetryMax, "longest delay between retries")
	fs.DurationVar(&r.unavailableBackoffMax, "unavailable-backoff-max", relay.DefaultUnavailableBackoffMax, "longest pause of the whole relay while the broker is unreachable")
	fs.DurationVar(&r.shutdownTimeout, "shutdown-timeout", relay.DefaultShutdownTimeout, "on SIGINT/SIGTERM, how long to wait for outstanding acks before releasing unsent messages")
}

// check applies relay.Config's rules to the flags, so that an error names the
// flag, and so that an explicit zero is refused rather than taken as "use the
// default".
func (r *relayFlags) check() error {
	switch {
	case r.batchSize < 1:
		return flagError("batch-size", "must be at least 1, not %d", r.batchSize)
	case r.maxRun < 1 || r.maxRun > r.batchSize:
		return flagError("max-run", "must be at least 1 and at most --batch-size (%d), not %d", r.batchSize, r.maxRun)
	case r.maxRunBytes < 1:
		return flagError("max-run-bytes", "must be at least 1, not %d", r.maxRunBytes)
	case r.workers < 1:
		return flagError("workers", "must be at least 1, not %d", r.workers)
	case r.lease < time.Second:
		return flagError("lease", "must be at least 1s, not %s", r.lease)
	case r.publishTimeout < 0 || (r.publishTimeout > 0 && r.publishTimeout >= r.lease):
		return flagError("publish-timeout", "must be positive and shorter than --lease (%s), not %s", r.lease, r.publishTimeout)
	case r.pollInterval < time.Millisecond:
		return flagError("poll-interval", "must be at least 1ms, not %s", r.pollInterval)
	case r.linger < 0 || r.linger >= cmp.Or(r.publishTimeout, r.lease/2):
		return flagError("linger", "must not be negative and must be shorter than the publish timeout, not %s", r.linger)
	case r.lingerAbove < 0:
		return flagError("linger-above", "must not be negative, not %v", r.lingerAbove)
	case r.maxAttempts < 1:
		return flagError("max-attempts", "must be at least 1, not %d", r.maxAttempts)
	case r.retryBase <= 0:
		return flagError("retry-base", "must be positive, not %s", r.retryBase)
	case r.retryMax < r.retryBase:
		return flagError("retry-max", "must be at least --retry-base (%s), not %s", r.retryBase, r.retryMax)
	case r.unavailableBackoffMax <= 0:
		return flagError("unavailable-backoff-max", "must be positive, not %s", r.unavailableBackoffMax)
	case r.shutdownTimeout < 0:
		return flagError("shutdown-timeout", "must not be negative, not %s", r.shutdownTimeout)
	}
	return nil
}

// config returns the relay.Config for the flags, with strategy, sink and
// logger; ID is filled in so that it can be logged before the relay starts.
func (r *relayFlags) config(strat strategy.Strategy, s sink.Sink, logger *slog.Logger) relay.Config {
	return relay.Config{
		Strategy:              strat,
		Sink:                  s,
		ID:                    r.id,
		BatchSize:             r.batchSize,
		MaxRun:                r.maxRun,
		MaxRunBytes:           r.maxRunBytes,
		Workers:               r.workers,
		Lease:                 r.lease,
		PublishTimeout:        r.publishTimeout,
		PollInterval:          r.pollInterval,
		Linger:                offIfZero(r.linger),
		LingerAbove:           offIfZero(r.lingerAbove),
		DisableListen:         r.noListen,
		MaxAttempts:           r.maxAttempts,
		RetryBase:             r.retryBase,
		RetryMax:              r.retryMax,
		UnavailableBackoffMax: r.unavailableBackoffMax,
		ShutdownTimeout:       r.shutdownTimeout,
		Logger:                logger,
	}.WithDefaults()
}

func newRelayCommand(a *app) *cobra.Command {
	var rf relayFlags
	var kf kafkaFlags
	var cf cdcFlags
	var af adminFlags
	cmd := &cobra.Command{
		Use:     "relay",
		GroupID: "run",
		Short:   "Publish outbox events from PostgreSQL to Kafka until stopped",
		Long: `relay claims due events from the outbox table in batches, publishes them to
Kafka, and marks each one SENT only after the broker acknowledged it.
Delivery is at least once, in order per aggregate; several relays can run
at once against one database.

A failed publish is retried with exponential backoff (--retry-base,
--retry-max); after --max-attempts failures, or at once for an event the
broker will never accept (too large, invalid), the event becomes
DEAD_LETTER and later events of its aggregate wait. An unreachable broker
pauses the relay without counting attempts. A topic that does not exist
(or that the relay may not write to) is configuration, not the event's
fault: its events wait, in order and without counting attempts, and go out
once it exists; the relay logs the topic and the fix, /readyz is not ready,
and 'outbox stats' and the status page show it. The relay does not ask the
broker to create topics unless --kafka-auto-create-topics. A database that
cannot be reached at start is waited for, with backoff up to 30s (not ready
on /readyz meanwhile); a refused password or role, or an unknown database,
ends the relay at once.

The relay runs until SIGINT or SIGTERM. It then stops claiming, waits up to
--shutdown-timeout for outstanding acks, gives unsent events back, and exits
with status 0.

Run 'outbox migrate' first. Events without a topic go to the --topic-route of
their aggregate type, or else to --default-topic.

The relay runs the mode the outbox records ('outbox mode'): claim (the
default: every relay claims and marks), cursor (one relay leads a cursor;
the others stand by) or cdc (the relay reads the outbox inserts from the WAL
by logical replication instead of polling; PostgreSQL needs
wal_level=logical; one relay per --slot streams, the others wait as
standbys; see docs/cdc.md). With --mode claim, cursor or cdc it refuses to
start when the outbox records another mode, naming both and the switch
('outbox mode set').`,
		Example: `  # Against a local 'outbox broker' (it creates topics on first use):
  outbox relay --database-url postgres://app@localhost:5432/app

  # In production, configured from the environment:
  export OUTBOX_DATABASE_URL=postgres://relay@db:5432/app
  export OUTBOX_KAFKA_BROKERS=kafka-1:9093,kafka-2:9093
  export OUTBOX_KAFKA_TLS=true OUTBOX_KAFKA_SASL_MECHANISM=SCRAM-SHA-512
  export OUTBOX_KAFKA_SASL_USERNAME=relay OUTBOX_KAFKA_SASL_PASSWORD=...
  outbox relay --topic-route Order=orders --topic-route Payment=payments

  # Change data capture instead of polling (once 'outbox mode set cdc'):
  outbox relay --mode cdc --topic-route Order=orders`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runRelayMode(cmd, &rf, &kf, &cf, &af)
		},
	}
	addRelayFlags(cmd.Flags(), &rf)
	addKafkaFlags(cmd.Flags(), &kf)
	addCDCFlags(cmd.Flags(), &cf)
	addAdminFlags(cmd.Flags(), &af)
	return cmd
}

// runRelay checks every setting before it touches the network, then runs
// the relay until the command's context is done. It runs the strategy of the outbox's mode (package relay/modes), which
// follows a switch between claim and cursor mode by itself; for an outbox
// in CDC mode it returns errRecordedCDC, or refuses (see checkMode).
func (a *app) runRelay(cmd *cobra.Command, rf *relayFlags, kf *kafkaFlags, af *adminFlags, cf *cdcFlags) error {
	ctx := cmd.Context()
	if err := rf.check(); err != nil {
		return err
	}
	if _, err := kf.config(a.logger); err != nil {
		return err
	}
	// Pool size: a connection per worker, one for LISTEN, one to spare.
	pool, err := a.newPool("relay", int32(max(4, rf.workers+2)), pgstore.ConfigureRelayPool)
	if err != nil {
		return err
	}
	defer pool.Close()
	st, err := a.newStore(pool)
	if err != nil {
		return err
	}
	snk, err := kf.newSink(a.logger, rf.workers)
	if err != nil {
		return err
	}
	defer func() {
		if err := snk.Close(); err != nil {
			a.logger.Warn("closing the Kafka client", slog.Any("error", err))
		}
	}()
	cfg := rf.config(modes.New(st, a.logger), snk, a.logger)
	adm, err := a.startAdmin(ctx, af, pool, snk, cfg.ID, nil)
	if err != nil {
		return err
	}
	defer adm.close()
	cfg.Hooks = adm.hooks
	r, err := relay.New(cfg)
	if err != nil {
		return &usageError{fmt.Errorf("relay settings: %w", err)}
	}

	attrs := []any{
		slog.String("relay_id", r.ID()),
		slog.String("schema", st.Schema()),
		slog.String("database", RedactURL(a.databaseURL)),
		slog.Bool("listen", !cfg.DisableListen),
		slog.Int("max_run", cfg.MaxRun),
	}
	attrs = append(attrs, kf.logAttrs()...)
	a.logger.Info("relay starting", attrs...)

	if err := a.awaitDependencies(ctx, pool, snk); err != nil {
		return err
	}
	if ctx.Err() == nil {
		if err := a.checkMode(ctx, st, cf, false); err != nil {
			return err
		}
		if err := r.Run(ctx); err != nil {
			return fmt.Errorf("relay %s: %w", r.ID(), err)
		}
	}
	a.logger.Info("relay exited", slog.String("relay_id", r.ID()))
	return nil
}

// awaitDependencies waits until the database answers, and warns if the
// broker does not or the configured topics are missing (checkKafka): the
// relay itself waits for the broker and for topics. It returns nil
// when ctx ends meanwhile (the relay then stops without having started).
func (a *app) awaitDependencies(ctx context.Context, pool *pgxpool.Pool, snk *kafka.Sink) error {
	if err := a.waitForDatabase(ctx, pool); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	a.checkKafka(ctx, snk)
	return nil
}

// checkKafka checks, at start, that a broker answers and that the topics
// the flags name exist, and logs what is wrong; the relay starts either
// way, since it waits for the broker and for missing topics.
func (a *app) checkKafka(ctx context.Context, snk *kafka.Sink) {
	check, cancel := context.WithTimeout(ctx, kafkaPingTimeout)
	defer cancel()
	if err := snk.Ping(check); err != nil {
		if ctx.Err() == nil {
			a.logger.Warn("Kafka brokers not reachable yet; the relay retries until they are", slog.Any("error", err))
		}
		return
	}
	if _, err := snk.CheckTopics(check); err != nil && ctx.Err() == nil {
		a.logger.Warn("could not check the configured topics", slog.Any("error", err))
	}
}

// offIfZero maps a flag's explicit 0 ("off", "any rate") to relay.Config's
// negative value for it: a zero field there means the default.
func offIfZero[T time.Duration | float64](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outbox-dev/outbox/internal/lifecycle"
	"github.com/outbox-dev/outbox/sink/kafka"
)

// ErrAlreadyRunning is returned by [Runner.Run] when the runner runs
// already, or ran before: a Runner runs once.
var ErrAlreadyRunning = errors.New("consumer: runner already ran")

// Runner consumes Kafka topics as a member of a consumer group and hands
// each record to an inbox handler. Create it with [New]; run it with
// [Runner.Run].
type Runner struct {
	cfg     Config
	app     Applier // cfg.Applier, or cfg.Inbox bound to cfg.Handler
	log     *slog.Logger
	secOpts []kgo.Opt
	ran     atomic.Bool

	// base carries the values of Run's context, without its cancellation,
	// to handler attempts, parking and commits: they finish on shutdown.
	base context.Context

	mu      sync.Mutex
	workers map[partitionKey]*worker
}

// partitionKey names one partition of one topic.
type partitionKey struct {
	topic     string
	partition int32
}

// New validates cfg (after defaults) and returns a runner that is not yet
// running. It does not connect. A bad cfg gives an error that wraps
// [ErrInvalidConfig] and names the field.
func New(cfg Config) (*Runner, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	secOpts, err := cfg.Security.Opts()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	app := cfg.Applier
	if app == nil {
		app = cfg.Inbox.Bind(cfg.Handler)
	}
	return &Runner{
		cfg:     cfg,
		app:     app,
		log:     cfg.Logger.With(slog.String("group", cfg.Group), slog.String("consumer", cfg.Consumer)),
		secOpts: secOpts,
		workers: map[partitionKey]*worker{},
	}, nil
}

// Run joins the consumer group and handles records until ctx ends; then it
// lets each partition finish the record it is handling (abandoning a
// pending retry), commits the offsets of what was done, leaves the group
// (a static member, [Config.InstanceID], does not) and returns nil. It returns an error only when the client cannot be
// created. A Runner runs once; a second call returns [ErrAlreadyRunning].
func (r *Runner) Run(ctx context.Context) error {
	if !r.ran.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	r.base = context.WithoutCancel(ctx)
	opts := []kgo.Opt{
		kgo.SeedBrokers(r.cfg.Brokers...),
		kgo.ClientID(r.cfg.ClientID),
		kgo.WithLogger(kafka.Logger(r.cfg.Logger)),
		kgo.ConsumerGroup(r.cfg.Group),
		kgo.SessionTimeout(r.cfg.SessionTimeout),
		kgo.RebalanceTimeout(r.cfg.RebalanceTimeout),
		kgo.HeartbeatInterval(min(3*time.Second, r.cfg.SessionTimeout/3)),
		kgo.ConsumeTopics(r.cfg.Topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Offsets are committed by the partition workers, each only up to
		// the records whose transaction committed (or that were parked).
		kgo.DisableAutoCommit(),
		// Rebalance callbacks never run between a poll and the hand-off of
		// its records to the workers: a revoked partition's records are
		// never given to a worker after its revoke.
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(r.assigned),
		kgo.OnPartitionsRevoked(r.revoked),
		kgo.OnPartitionsLost(r.lost),
	}
	if r.cfg.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(r.cfg.InstanceID))
	}
	opts = append(opts, r.secOpts...)
	opts = append(opts, r.cfg.ExtraOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("consumer: new client: %w", err)
	}
	r.log.Info("consumer started", slog.Any("topics", r.cfg.Topics), slog.Int("max_attempts", r.cfg.MaxAttempts))
	stopLag := func() {}
	if r.cfg.LagRefresh > 0 {
		lagCtx, cancel := context.WithCancel(ctx)
		lagDone := make(chan struct{})
		go func() { defer close(lagDone); r.refreshLag(lagCtx, cl) }()
		stopLag = func() { cancel(); <-lagDone }
	}

	for {
		fetches := cl.PollRecords(ctx, r.cfg.MaxPollRecords)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			break // records polled now are not handed out: not committed, so delivered again
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			r.log.Warn("fetch failed", slog.String("topic", topic), slog.Int("partition", int(partition)),
				slog.Any("error", err))
		})
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) > 0 {
				r.dispatch(cl, p)
			}
		})
		cl.AllowRebalance()
	}

	stopLag()
	r.stop(cl, nil, true)
	cl.CloseAllowingRebalance()
	r.log.Info("consumer stopped")
	return nil
}

// dispatch queues the records of one partition for its worker.
func (r *Runner) dispatch(cl *kgo.Client, p kgo.FetchTopicPartition) {
	key := partitionKey{p.Topic, p.Partition}
	r.mu.Lock()
	w := r.workers[key]
	if w == nil {
		// OnPartitionsAssigned runs before a partition is fetched, so this
		// does not happen; a worker started here is as correct.
		r.log.Warn("records of a partition without a worker", slog.String("topic", p.Topic),
			slog.Int("partition", int(p.Partition)))
		w = r.startLocked(cl, key)
	}
	r.mu.Unlock()
	w.add(p.Records, p.HighWatermark)
}

// Lag returns the lag of each partition this runner handles, by topic and
// partition: how many records from the one after the last record it
// finished (handled or parked) up to the partition's high watermark, as
// last seen in a fetch or a refresh (Config.LagRefresh). A partition is
// missing until its first fetch brought a record. Lag is not the distance
// from the group's committed offset: a record is counted as consumed once
// its transaction committed, before its offset is committed.
func (r *Runner) Lag() map[string]map[int32]int64 {
	r.mu.Lock()
	ws := make([]*worker, 0, len(r.workers))
	for _, w := range r.workers {
		ws = append(ws, w)
	}
	r.mu.Unlock()
	out := map[string]map[int32]int64{}
	for _, w := range ws {
		lag := w.lag()
		if lag < 0 {
			continue
		}
		if out[w.key.topic] == nil {
			out[w.key.topic] = map[int32]int64{}
		}
		out[w.key.topic][w.key.partition] = lag
	}
	return out
}

// refreshLag asks the partitions' leaders for their high watermarks every
// LagRefresh until ctx ends, for the partitions whose fetching is paused
// (or idle), so that their lag does not go stale.
func (r *Runner) refreshLag(ctx context.Context, cl *kgo.Client) {
	lifecycle.Every(ctx, r.cfg.LagRefresh, func() bool {
		r.refreshLagOnce(ctx, cl)
		return true
	})
}

// refreshLagOnce asks for the high watermarks of the partitions that have
// workers now, and gives each worker its own.
func (r *Runner) refreshLagOnce(ctx context.Context, cl *kgo.Client) {
	r.mu.Lock()
	ws := make(map[partitionKey]*worker, len(r.workers))
	maps.Copy(ws, r.workers)
	r.mu.Unlock()
	if len(ws) == 0 {
		return
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = 0 // the high watermark, as fetches report it
	byTopic := map[string]int{}
	for key := range ws {
		i, ok := byTopic[key.topic]
		if !ok {
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = key.topic
			req.Topics = append(req.Topics, rt)
			i = len(req.Topics) - 1
			byTopic[key.topic] = i
		}
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = key.partition
		rp.Timestamp = -1 // latest
		rp.CurrentLeaderEpoch = -1
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	rctx, cancel := context.WithTimeout(ctx, r.cfg.LagRefresh)
	resp, err := req.RequestWith(rctx, cl)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			r.log.Debug("lag refresh failed", slog.Any("error", err))
		}
		return
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if w := ws[partitionKey{rt.Topic, rp.Partition}]; w != nil && rp.ErrorCode == 0 {
				w.setHighWatermark(rp.Offset)
			}
		}
	}
}

// assigned starts a worker for each newly assigned partition.
func (r *Runner) assigned(_ context.Context, cl *kgo.Client, assigned map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for topic, partitions := range assigned {
		for _, p := range partitions {
			if key := (partitionKey{topic, p}); r.workers[key] == nil {
				r.startLocked(cl, key)
			}
		}
	}
	r.log.Info("partitions assigned", slog.Any("partitions", assigned))
}

// revoked stops the workers of partitions this member gives up: each
// finishes its current record and commits the offsets of what it did, so
// that the next owner starts after it.
func (r *Runner) revoked(_ context.Context, cl *kgo.Client, revoked map[string][]int32) {
	r.stop(cl, revoked, true)
	if len(revoked) > 0 {
		r.log.Info("partitions revoked", slog.Any("partitions", revoked))
	}
}

// lost stops the workers of partitions this member lost without a clean
// revoke (its session ended): another member may own them already, so
// nothing is committed; the next owner redelivers what was not committed,
// and the inbox absorbs what was done.
func (r *Runner) lost(_ context.Context, cl *kgo.Client, lost map[string][]int32) {
	r.stop(cl, lost, false)
	if len(lost) > 0 {
		r.log.Warn("partitions lost", slog.Any("partitions", lost))
	}
}

func (r *Runner) startLocked(cl *kgo.Client, key partitionKey) *worker {
	w := newWorker(r, cl, key)
	r.workers[key] = w
	go w.run()
	return w
}

// stop stops the workers of partitions (all when nil) and waits for them.
// With commit, each commits the offsets of the records it finished. A
// worker stays in the map until it is done, so that a revoke running at the
// same time as a shutdown waits for it too. Fetching of the partitions is
// resumed, in case a worker had paused it, so that a partition assigned
// again later is fetched.
func (r *Runner) stop(cl *kgo.Client, partitions map[string][]int32, commit bool) {
	r.mu.Lock()
	var ws []*worker
	for key, w := range r.workers {
		if partitions == nil || containsPartition(partitions, key) {
			ws = append(ws, w)
		}
	}
	r.mu.Unlock()
	resume := map[string][]int32{}
	for _, w := range ws {
		w.stop(commit)
		resume[w.key.topic] = append(resume[w.key.topic], w.key.partition)
	}
	for _, w := range ws {
		<-w.done
	}
	r.mu.Lock()
	for _, w := range ws {
		if r.workers[w.key] == w {
			delete(r.workers, w.key)
		}
	}
	r.mu.Unlock()
	if len(resume) > 0 {
		cl.ResumeFetchPartitions(resume)
	}
}

func containsPartition(m map[string][]int32, key partitionKey) bool {
	for _, p := range m[key.topic] {
		if p == key.partition {
			return true
		}
	}
	return false
}

package relay

import (
	"errors"
	"log/slog"
	"time"

	"github.com/outbox-dev/outbox/internal/conf"
	"github.com/outbox-dev/outbox/relay/failure"
	"github.com/outbox-dev/outbox/relay/strategy"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/store"
)

// Config configures a Relay. Zero fields take the documented defaults.
type Config struct {
	// Strategy finds the messages to publish and records what became of
	// them (see package strategy): claim.New(queue), or a strategy of its
	// own such as package relay/cursor's. Exactly one of Strategy and
	// Store is required.
	Strategy strategy.Strategy
	// Store is short for Strategy: claim.New(Store), the claim strategy,
	// in which any number of relays share the work. If the store also
	// implements store.Notifier and DisableListen is not set, the relay
	// wakes on new messages at once.
	Store store.Queue
	// Sink is where messages are published. Required.
	Sink sink.Sink

	// ID names this relay instance in leases and logs. Defaults to
	// "<hostname>-<pid>-<random>".
	ID string
	// BatchSize is the most messages one claim takes. Defaults to 100.
	BatchSize int
	// MaxRun is the most consecutive messages of one aggregate a claim may
	// take together (a run, published in one call and marked together;
	// see the package documentation). It is at most BatchSize, and above
	// 1 the Sink must implement sink.RunSink. A strategy that cannot claim
	// runs ignores it. Defaults to 1: one message per aggregate per batch.
	MaxRun int
	// MaxRunBytes bounds the payload of a run: a later message of the
	// aggregate joins its run only while the payload bytes of the run stay
	// within it; the first is claimed whatever its size. Defaults to 1 MiB
	// (DefaultMaxRunBytes).
	MaxRunBytes int
	// Workers is the number of claim-publish-mark loops that run at once,
	// so that one batch is claimed while another waits for acks. The first
	// always claims; the others join while claims come back full (a
	// backlog) or a publish is slow (SlowPublish), and rest otherwise.
	// Defaults to 2.
	Workers int
	// Lease is how long a claim holds its messages. A crashed relay's
	// messages become claimable again after it. Defaults to 30s.
	Lease time.Duration
	// PublishTimeout bounds the wait for the broker's acks of one batch.
	// It must be shorter than Lease. Defaults to Lease/2.
	PublishTimeout time.Duration
	// PollInterval is how often an idle relay looks for due messages when
	// it is not woken by a notification. After finding work it looks again
	// at once, and after an empty claim it polls as IdleAfter says, so a
	// busy relay never waits long. Defaults to 1s.
	PollInterval time.Duration
	// IdleAfter is how long claims must keep finding nothing before the
	// relay registers as idle with the store's notifier and waits for a
	// notification (or PollInterval). Until then it claims again after
	// 1ms, then every 2ms. While a relay is registered, every
	// transaction that enqueues sends a NOTIFY, which serializes the
	// writers' commits; a relay that merely keeps up with the writers
	// (its claims empty now and then) must not make them pay for that.
	// Defaults to 50ms; negative registers after the first empty claim.
	IdleAfter time.Duration
	// Linger trades latency for database work under load: after publishing
	// a batch smaller than BatchSize, a worker waits before claiming the
	// next, so that the claim finds more messages. Messages enqueued
	// meanwhile reach the broker that much later. A strategy that marks a
	// batch and claims the next in one round trip (the claim strategy over
	// pgstore) waits before that round trip, so that every message's mark
	// comes that much later too; otherwise the batch is marked first. The
	// wait grows with the load: nothing while the relay claims at
	// most LingerAbove messages per second, then in proportion to the rate
	// above it, up to Linger at twice LingerAbove and beyond (with the
	// defaults: 5ms at 1,500/s, 10ms at 1,800/s, 20ms from 2,400/s). A
	// relay that keeps up with writers at the database's limit thus claims
	// tens of messages per round trip instead of a few, and one that is not
	// pressed claims at once. Defaults to 20ms (DefaultLinger); negative
	// turns lingering off.
	Linger time.Duration
	// LingerAbove is the claim rate (messages per second, measured over the
	// last 250ms, or since the relay's claims started finding messages if
	// that was less than 250ms ago, but over at least 50ms) above which a
	// worker starts to linger; see Linger. So a relay lingers within about
	// 50ms of writers starting at full speed, not after a whole window of
	// claims with a few messages each. At
	// 1,000 events/s a relay with the default does not linger, and a
	// message reaches the broker about 1ms after its commit. Defaults to
	// 1,200 (DefaultLingerAbove); negative lingers Linger at any rate.
	LingerAbove float64
	// SlowPublish is how long a publish may wait for the broker's acks
	// before the workers that rest claim beside it (see Workers): the
	// first worker alone keeps up while acks come fast, but a slow ack (a
	// distant or struggling broker, a partition without a leader) must not
	// hold up the messages of the others for longer than this. While the
	// publish waits they are woken again after 2, 4, 8 ... times
	// SlowPublish (at most PollInterval apart). Defaults to 10ms (a healthy
	// broker nearby acknowledges well within that, and the first worker
	// alone keeps up); negative: the others join only for full batches.
	SlowPublish time.Duration
	// DisableListen turns off the strategy's wake-ups (Strategy.Wakeups:
	// LISTEN/NOTIFY with pgstore), for connection poolers in transaction
	// mode such as PgBouncer; the relay then relies on PollInterval. A relay with LISTEN on whose store finds at
	// start that notifications do not arrive (pgstore behind such a pooler)
	// logs a warning and polls as well. Defaults to false.
	DisableListen bool
	// MaxAttempts is the number of failed attempts after which a message
	// becomes DEAD_LETTER. Defaults to 10.
	MaxAttempts int
	// RetryBase and RetryMax shape the delay before retry n:
	// min(RetryMax, RetryBase * 2^n), with jitter of up to half of it
	// subtracted. Default to 1s and 300s (2^attempt seconds, capped at
	// 300s).
	RetryBase, RetryMax time.Duration
	// UnavailableBackoffMax caps the pause of the whole relay while the
	// broker is unreachable (it starts at 500ms and doubles). Defaults
	// to 30s.
	UnavailableBackoffMax time.Duration
	// ShutdownTimeout bounds how long Stop waits for outstanding acks
	// before releasing the leases of what was not sent. Defaults to 10s.
	ShutdownTimeout time.Duration
	// Logger receives structured logs. Defaults to slog.Default().
	Logger *slog.Logger
	// Hooks observe the relay (metrics). Optional.
	Hooks Hooks
}

// lingerAt is how long a worker lingers while the relay claims perSecond
// messages per second (see Linger).
func (c Config) lingerAt(perSecond float64) time.Duration {
	switch {
	case c.Linger <= 0:
		return 0
	case c.LingerAbove < 0 || perSecond >= 2*c.LingerAbove:
		return c.Linger
	case perSecond <= c.LingerAbove:
		return 0
	}
	return time.Duration(float64(c.Linger) * (perSecond - c.LingerAbove) / c.LingerAbove)
}

// Defaults of Config.
const (
	DefaultBatchSize             = 100
	DefaultMaxRun                = 1
	DefaultMaxRunBytes           = 1 << 20
	DefaultWorkers               = 2
	DefaultLease                 = 30 * time.Second
	DefaultPollInterval          = time.Second
	DefaultIdleAfter             = 50 * time.Millisecond
	DefaultLinger                = 20 * time.Millisecond
	DefaultLingerAbove           = 1200.0
	DefaultSlowPublish           = 10 * time.Millisecond
	DefaultMaxAttempts           = failure.DefaultMaxAttempts
	DefaultRetryBase             = failure.DefaultRetryBase
	DefaultRetryMax              = failure.DefaultRetryMax
	DefaultUnavailableBackoffMax = failure.DefaultPauseMax
	DefaultShutdownTimeout       = 10 * time.Second
)

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.ID == "" {
		c.ID = conf.InstanceID()
	}
	conf.Default(&c.BatchSize, DefaultBatchSize)
	conf.Default(&c.MaxRun, DefaultMaxRun)
	conf.Default(&c.MaxRunBytes, DefaultMaxRunBytes)
	conf.Default(&c.Workers, DefaultWorkers)
	conf.Default(&c.Lease, DefaultLease)
	conf.Default(&c.PublishTimeout, c.Lease/2)
	conf.Default(&c.PollInterval, DefaultPollInterval)
	conf.Default(&c.IdleAfter, DefaultIdleAfter)
	conf.Default(&c.Linger, DefaultLinger)
	conf.Default(&c.LingerAbove, DefaultLingerAbove)
	conf.Default(&c.SlowPublish, DefaultSlowPublish)
	conf.Default(&c.MaxAttempts, DefaultMaxAttempts)
	conf.Default(&c.RetryBase, DefaultRetryBase)
	conf.Default(&c.RetryMax, DefaultRetryMax)
	conf.Default(&c.UnavailableBackoffMax, DefaultUnavailableBackoffMax)
	conf.Default(&c.ShutdownTimeout, DefaultShutdownTimeout)
	conf.Default(&c.Logger, slog.Default())
	return c
}

// ErrInvalidConfig is wrapped by the error New returns for a bad Config.
var ErrInvalidConfig = errors.New("relay: invalid config")

// validate checks c after defaults and names the first bad field.
func (c Config) validate() error {
	return conf.First(ErrInvalidConfig,
		conf.Rule("Store/Strategy", (c.Store == nil) != (c.Strategy == nil),
			"exactly one is required, not %s", setCount(c.Store != nil, c.Strategy != nil)),
		conf.Required("Sink", c.Sink != nil),
		conf.AtLeast("BatchSize", c.BatchSize, 1),
		conf.Rule("MaxRun", c.MaxRun >= 1 && c.MaxRun <= c.BatchSize,
			"must be at least 1 and at most BatchSize (%d), not %d", c.BatchSize, c.MaxRun),
		conf.Rule("MaxRun", c.MaxRun == 1 || isRunSink(c.Sink),
			"above 1 requires a Sink that implements sink.RunSink (publishes a run without a gap); %T does not", c.Sink),
		conf.NotNegative("MaxRunBytes", c.MaxRunBytes),
		conf.AtLeast("Workers", c.Workers, 1),
		conf.AtLeast("Lease", c.Lease, time.Second),
		conf.Rule("PublishTimeout", c.PublishTimeout > 0 && c.PublishTimeout < c.Lease,
			"must be positive and shorter than Lease (%v), not %v", c.Lease, c.PublishTimeout),
		conf.AtLeast("PollInterval", c.PollInterval, time.Millisecond),
		conf.Rule("Linger", c.Linger < c.PublishTimeout,
			"must be shorter than PublishTimeout (%v), not %v", c.PublishTimeout, c.Linger),
		conf.AtLeast("MaxAttempts", c.MaxAttempts, 1),
		conf.Rule("RetryBase/RetryMax", c.RetryBase > 0 && c.RetryMax >= c.RetryBase,
			"must be positive with RetryMax >= RetryBase, not %v and %v", c.RetryBase, c.RetryMax),
		conf.Positive("UnavailableBackoffMax", c.UnavailableBackoffMax),
		conf.NotNegative("ShutdownTimeout", c.ShutdownTimeout),
	)
}

// isRunSink reports whether s can publish runs.
func isRunSink(s sink.Sink) bool {
	_, ok := s.(sink.RunSink)
	return ok
}

// setCount says how many of a pair of fields are set: "neither" or "both".
func setCount(a, b bool) string {
	if a && b {
		return "both"
	}
	return "neither"
}

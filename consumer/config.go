package consumer

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox/inbox"
	"github.com/outbox-dev/outbox/internal/conf"
	"github.com/outbox-dev/outbox/sink/kafka"
)

// Defaults of [Config].
const (
	// DefaultClientID is the default of Config.ClientID.
	DefaultClientID = "outbox-consumer"
	// DefaultMaxAttempts is the default of Config.MaxAttempts.
	DefaultMaxAttempts = 5
	// DefaultRetryBase is the default of Config.RetryBase.
	DefaultRetryBase = 200 * time.Millisecond
	// DefaultRetryMax is the default of Config.RetryMax.
	DefaultRetryMax = 10 * time.Second
	// DefaultHandlerTimeout is the default of Config.HandlerTimeout.
	DefaultHandlerTimeout = 30 * time.Second
	// DefaultMaxPollRecords is the default of Config.MaxPollRecords.
	DefaultMaxPollRecords = 500
	// DefaultSessionTimeout is the default of Config.SessionTimeout:
	// Kafka's own default (session.timeout.ms).
	DefaultSessionTimeout = 45 * time.Second
	// DefaultRebalanceTimeout is the default of Config.RebalanceTimeout:
	// the Kafka Java client's default (rebalance.timeout.ms).
	DefaultRebalanceTimeout = 60 * time.Second
	// DefaultLagRefresh is the default of Config.LagRefresh.
	DefaultLagRefresh = 10 * time.Second
)

// ErrInvalidConfig is wrapped by the error [New] returns for a Config it
// cannot use; the message names the bad field.
var ErrInvalidConfig = errors.New("consumer: invalid config")

// Applier applies, parks and checks messages for the runner: an inbox with
// its handler bound to it. [inbox.Inbox.Bind] (PostgreSQL) and
// [inbox.SQLiteInbox.Bind] (SQLite) return one. Apply must have the
// semantics of [inbox.Inbox.Handle]: the effect and the record of the
// message commit together, a message applied before is reported as
// [inbox.Duplicate], and an error leaves nothing behind.
type Applier interface {
	// Apply applies msg once for consumer.
	Apply(ctx context.Context, consumer string, msg inbox.Message) (inbox.Result, error)
	// Park keeps msg as a message consumer gave up on.
	Park(ctx context.Context, consumer string, msg inbox.Message, attempts int, cause error) error
	// Ping reports whether the database answers; the runner does not
	// count attempts that failed while it does not.
	Ping(ctx context.Context) error
}

// Compile-time proof that both inboxes, bound to a handler, are Appliers.
var _ Applier = (*inbox.Bound)(nil)

// Config configures a [Runner]. Brokers, Group and Topics are required, and
// either Applier or both Inbox and Handler.
type Config struct {
	// Brokers are the seed brokers, as host:port. Required.
	Brokers []string
	// Security configures TLS and SASL, as for the relay's sink. Defaults
	// to plaintext without authentication.
	Security kafka.Security
	// Group is the Kafka consumer group. Instances with the same group
	// share the partitions of Topics. Required.
	Group string
	// Topics are consumed from their earliest offset when the group has no
	// committed offset yet. Required.
	Topics []string
	// Consumer is the name under which the inbox records processed
	// messages and parks failed ones. Defaults to Group.
	Consumer string
	// Inbox deduplicates and parks messages in PostgreSQL. Required with
	// Handler, unless Applier is set.
	Inbox *inbox.Inbox
	// Handler applies a message in the inbox's transaction; see
	// [inbox.HandlerFunc]. Required with Inbox, unless Applier is set.
	Handler inbox.HandlerFunc
	// Applier applies, deduplicates and parks messages; set it instead of
	// Inbox and Handler, for example to sqliteInbox.Bind(handler) for a
	// consumer on SQLite ([inbox.SQLiteInbox.Bind]). Inbox and Handler are
	// the same as Applier: Inbox.Bind(Handler). Defaults to none.
	Applier Applier

	// MaxAttempts is the number of failed handler attempts after which a
	// message is parked and its partition moves on. An error wrapping
	// inbox.ErrPermanent parks at once. Defaults to 5.
	MaxAttempts int
	// RetryBase and RetryMax shape the wait before retry n (n = 1, 2, ...):
	// min(RetryMax, RetryBase * 2^(n-1)), minus up to half of it as jitter.
	// Default to 200ms and 10s.
	RetryBase, RetryMax time.Duration
	// HandlerTimeout bounds one attempt (the handler and its transaction);
	// an attempt that takes longer fails and is retried. On a rebalance or
	// shutdown the runner waits for the attempt in progress, so keep it
	// well below the group's rebalance timeout (60s by default). Defaults
	// to 30s.
	HandlerTimeout time.Duration
	// MaxPollRecords is the most records taken from the client at once. A
	// partition with that many records waiting for its handler stops being
	// fetched until they are handled. Defaults to 500.
	MaxPollRecords int
	// ClientID is the Kafka client id. Defaults to "outbox-consumer".
	ClientID string
	// Logger receives structured logs. Defaults to slog.Default().
	Logger *slog.Logger
	// Hooks observe the runner (metrics). Optional.
	Hooks Hooks
	// SessionTimeout is how long the group waits for a member that stopped
	// heartbeating (a crashed process) before it gives that member's
	// partitions to the others; until then they are not consumed. Shorter
	// means faster recovery from a crash and more rebalances on a pause
	// (a long GC or network stall). The broker accepts values between its
	// group.min.session.timeout.ms (6s by default) and
	// group.max.session.timeout.ms (30 min). The heartbeat interval is a
	// third of it, at most 3s. Defaults to [DefaultSessionTimeout].
	SessionTimeout time.Duration
	// RebalanceTimeout is how long a rebalance waits for the group's
	// members to rejoin; a member that crashed without leaving holds every
	// join up to this long. It must cover finishing the records in hand
	// when a rebalance starts (the runner finishes them before it gives
	// partitions up). Defaults to [DefaultRebalanceTimeout].
	RebalanceTimeout time.Duration
	// InstanceID makes the runner a static member of the group (Kafka's
	// group.instance.id, KIP-345). A restarted instance with the same id
	// takes its partitions back at once, without a rebalance, if it comes
	// back within SessionTimeout; a dynamic member gets partitions only
	// after the group has waited for its dead predecessor (SessionTimeout,
	// and RebalanceTimeout on each join). Every instance running at the
	// same time needs its own id, stable across its restarts (a
	// StatefulSet pod name, for example): two running with one id fence
	// each other out of the group. franz-go sends no LeaveGroup for a
	// static member when it closes, so after a clean shutdown of an
	// instance that does not come back, its partitions wait SessionTimeout
	// before the others get them. Kafka's rule for topic names applies: 1
	// to 249 ASCII letters, digits, '.', '_' or '-', and not "." or "..".
	// Defaults to none: dynamic membership.
	InstanceID string
	// LagRefresh is how often the runner asks the brokers for the high
	// watermarks of its partitions, so that [Runner.Lag] stays true while
	// fetching is paused (a partition whose worker has MaxPollRecords
	// waiting is not fetched, and fetches are what carry the high
	// watermark otherwise). Defaults to [DefaultLagRefresh]; a negative
	// value turns the refresh off.
	LagRefresh time.Duration
	// ExtraOpts are passed to kgo.NewClient after the options built from
	// the fields above, so they override them (session timeout, heartbeat
	// interval, balancers). Do not turn autocommit back on or change the
	// rebalance callbacks: the runner's guarantees rest on them. Defaults to
	// none.
	ExtraOpts []kgo.Opt
}

// Hooks observe what the runner does, for metrics. Every field is optional;
// hooks run on the partitions' goroutines and must return quickly.
type Hooks struct {
	// Handled is called after Inbox.Handle succeeded (the transaction is
	// committed, or the message was a duplicate) and before the offset is
	// committed, with the time the attempt took.
	Handled func(msg inbox.Message, result inbox.Result, latency time.Duration)
	// Parked is called after a message was parked, with the error that made
	// the runner give up.
	Parked func(msg inbox.Message, err error)
	// Retried is called after a failed attempt that will be retried.
	Retried func(msg inbox.Message, err error)
	// Lag is called with a partition's lag: the records from the one
	// after the last record this runner finished (handled or parked) up to
	// the partition's high watermark (its end offset). It is called when a
	// fetch or a refresh ([Config.LagRefresh]) brings a new high
	// watermark and after each finished record. See [Runner.Lag].
	Lag func(topic string, partition int32, lag int64)
	// Unassigned is called when the runner stops handling a partition
	// (revoked, lost, or the runner stopped): its lag is no longer this
	// runner's to report.
	Unassigned func(topic string, partition int32)
}

// topicRe is the character set and length of Kafka's rule for topic
// names; see validName.
var topicRe = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)

// validName reports whether s follows Kafka's rule for topic names, which
// Kafka's clients apply to group.instance.id too
// (JoinGroupRequest.validateGroupInstanceId).
func validName(s string) bool {
	return topicRe.MatchString(s) && s != "." && s != ".."
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	conf.Default(&c.Consumer, c.Group)
	conf.Default(&c.MaxAttempts, DefaultMaxAttempts)
	conf.Default(&c.RetryBase, DefaultRetryBase)
	conf.Default(&c.RetryMax, DefaultRetryMax)
	conf.Default(&c.LagRefresh, DefaultLagRefresh)
	conf.Default(&c.SessionTimeout, DefaultSessionTimeout)
	conf.Default(&c.RebalanceTimeout, DefaultRebalanceTimeout)
	conf.Default(&c.HandlerTimeout, DefaultHandlerTimeout)
	conf.Default(&c.MaxPollRecords, DefaultMaxPollRecords)
	conf.Default(&c.ClientID, DefaultClientID)
	conf.Default(&c.Logger, slog.Default())
	return c
}

// validate checks c after defaults and names the first bad field.
func (c Config) validate() error {
	return conf.First(ErrInvalidConfig,
		conf.Rule("Brokers", len(c.Brokers) > 0, "needs at least one seed broker"),
		conf.Each("Brokers", c.Brokers, conf.NotEmpty),
		conf.Required("Group", c.Group != ""),
		conf.Rule("Topics", len(c.Topics) > 0, "needs at least one topic"),
		conf.Each("Topics", c.Topics, func(field, t string) error {
			return conf.Rule(field, validName(t), "%q is not a valid topic name", t)
		}),
		c.applierRule(),
		conf.AtLeast("MaxAttempts", c.MaxAttempts, 1),
		conf.Positive("RetryBase", c.RetryBase),
		conf.Rule("RetryMax", c.RetryMax >= c.RetryBase, "must be at least RetryBase (%v), not %v", c.RetryBase, c.RetryMax),
		conf.AtLeast("SessionTimeout", c.SessionTimeout, time.Second),
		conf.AtLeast("RebalanceTimeout", c.RebalanceTimeout, time.Second),
		conf.Rule("InstanceID", c.InstanceID == "" || validName(c.InstanceID),
			"%q is not a valid group instance id: 1 to 249 ASCII letters, digits, '.', '_' or '-', and not \".\" or \"..\"", c.InstanceID),
		conf.Positive("HandlerTimeout", c.HandlerTimeout),
		conf.AtLeast("MaxPollRecords", c.MaxPollRecords, 1),
	)
}

// applierRule checks that c names either an Applier, or an Inbox and a
// Handler.
func (c Config) applierRule() error {
	switch {
	case c.Applier != nil && (c.Inbox != nil || c.Handler != nil):
		return conf.Bad("Applier", "must not be set together with Inbox or Handler (set either Applier, or Inbox and Handler)")
	case c.Applier == nil && c.Inbox == nil && c.Handler == nil:
		return conf.Bad("Applier", "is required (or Inbox and Handler)")
	case c.Applier == nil && c.Inbox == nil:
		return conf.Bad("Inbox", "is required with Handler")
	case c.Applier == nil && c.Handler == nil:
		return conf.Bad("Handler", "is required with Inbox")
	}
	return nil
}

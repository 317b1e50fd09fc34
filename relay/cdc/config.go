package cdc

import (
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox/internal/conf"
	"github.com/outbox-dev/outbox/internal/sqlname"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/relay/failure"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// Cleanup says what the relay does with a row once the broker acknowledged
// its message.
type Cleanup int

const (
	// CleanupMarkSent marks the row SENT with published_at, like the polling
	// relay. The table keeps a record of what was published, and switching
	// back to polling re-sends nothing that CDC had marked.
	CleanupMarkSent Cleanup = iota
	// CleanupDelete deletes the row ("write and forget"): the table holds
	// only what is not yet published, while the WAL carries the event. No
	// retention job is needed; there is no record of sent messages.
	CleanupDelete
)

func (c Cleanup) String() string {
	switch c {
	case CleanupMarkSent:
		return "mark-sent"
	case CleanupDelete:
		return "delete"
	}
	return fmt.Sprintf("Cleanup(%d)", int(c))
}

// Defaults of [Config].
const (
	DefaultBatchSize             = 500
	DefaultPublishTimeout        = 15 * time.Second
	DefaultStatusInterval        = time.Second
	DefaultHeartbeatInterval     = 10 * time.Second
	DefaultStandbyInterval       = 2 * time.Second
	DefaultLeaderLease           = 5 * time.Second
	DefaultTablePathInterval     = time.Second
	DefaultLagLogInterval        = time.Minute
	DefaultLease                 = relay.DefaultLease
	DefaultMaxAttempts           = failure.DefaultMaxAttempts
	DefaultRetryBase             = failure.DefaultRetryBase
	DefaultRetryMax              = failure.DefaultRetryMax
	DefaultUnavailableBackoffMax = failure.DefaultPauseMax
	DefaultShutdownTimeout       = relay.DefaultShutdownTimeout
	DefaultMaxRun                = relay.DefaultMaxRun
	DefaultMaxRunBytes           = relay.DefaultMaxRunBytes
	// DefaultMaxInFlightBytes bounds the bytes of the messages the relay
	// holds (see Config.MaxInFlightBytes).
	DefaultMaxInFlightBytes = 64 << 20
	// DefaultInFlightBatches is how many batches may be in flight when
	// Config.MaxInFlight is zero: MaxInFlight defaults to
	// DefaultInFlightBatches × BatchSize.
	DefaultInFlightBatches = 4
)

// nameRe is the rule for slot and publication names: PostgreSQL allows
// only lower-case letters, digits and underscores in slot names, and the
// same rule keeps publication names unambiguous.
var nameRe = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

// Config configures a [Relay]. Zero fields take the documented defaults;
// only Pool and Sink are required.
type Config struct {
	// Pool is the connection pool for ordinary statements: the checks and
	// marks of each batch, the table path, setup and heartbeats. Required.
	Pool *pgxpool.Pool
	// Sink publishes the messages. Required. Use a *kafka.Sink for the
	// same record contract (key, headers, topic routing) as the polling
	// relay.
	Sink sink.Sink
	// ConnString is the connection string of the replication connection;
	// the relay adds replication=database to it. The role needs the
	// REPLICATION attribute (or superuser). Defaults to the connection
	// string Pool was created with.
	ConnString string
	// Schema is the schema of the outbox table, as in pgstore.Config.
	// Defaults to "outbox".
	Schema string
	// Slot is the name of the logical replication slot, created if absent.
	// Lower-case letters, digits and '_', at most 63 bytes. Defaults to
	// "outbox_" + Schema (shortened with a hash if too long).
	Slot string
	// Publication is the name of the publication on the outbox table
	// (publish = 'insert'), created if absent. Same rule as Slot. Defaults
	// to Slot.
	Publication string
	// RecreateSlot allows the relay to create a new slot when the slot it
	// recorded earlier is gone or invalidated. Without it, the relay refuses
	// to start with an error wrapping [ErrSlotLost]. The new slot starts
	// with every unsent message of the table handed to the table path, so
	// nothing still in the table is lost. It applies to the first time this
	// Relay becomes the active one. Defaults to false.
	RecreateSlot bool
	// Cleanup is what happens to a row after its ack. Defaults to
	// [CleanupMarkSent].
	Cleanup Cleanup

	// ID names this relay instance in logs and in the leases of the table
	// path. Defaults to "<hostname>-<pid>-<random>".
	ID string
	// BatchSize is the most messages read from the stream and checked
	// together, and the most one worker of the stream's relay core claims
	// at once. Defaults to 500.
	BatchSize int
	// MaxRun is the most consecutive messages of one aggregate that one
	// claim of the stream's relay core may take together (a run, published
	// in one call and marked together), as relay.Config.MaxRun: a worker's
	// claim hands out, per aggregate, the message that is ready and the
	// messages right after it in commit order. It is at most BatchSize, and
	// above 1 the Sink must implement sink.RunSink. The table path publishes
	// one message per aggregate per batch. Defaults to 1: runs off.
	MaxRun int
	// MaxRunBytes bounds the payload of a run: a later message of the
	// aggregate joins its run only while the payload bytes of the run stay
	// within it; the first is handed out whatever its size. Defaults to 1
	// MiB (relay.DefaultMaxRunBytes).
	MaxRunBytes int
	// MaxInFlight is the most messages received from the stream and not
	// yet confirmed: being checked, awaiting their publish, the broker's
	// acks or their record. While earlier messages await acks and records
	// the relay reads and checks the next batches (pipelining), up to this
	// bound; then it stops reading the stream until messages are recorded.
	// A new batch starts only when a full one fits, and the stream's relay
	// core runs ceil(MaxInFlight / BatchSize) workers, so MaxInFlight =
	// BatchSize turns pipelining off: one batch at a time, published by one
	// worker whose claims follow commit order (the first messages of the
	// batch's aggregates, then the next ones after their acks). Below
	// BatchSize, batches are smaller. Defaults to DefaultInFlightBatches (4) ×
	// BatchSize.
	MaxInFlight int
	// MaxInFlightBytes bounds the bytes of the messages the relay holds
	// (payload, text fields and headers, plus 256 bytes each), from the
	// moment the stream reader has decoded one until the confirmed position
	// passed it: waiting to be checked, being checked, published or
	// recorded.
	// When it is reached the relay reads no further (the slot keeps the
	// rest of the stream). A single message larger than the bound still
	// goes through, alone. On top of it come the message being read (its
	// text form arrives whole, a bytea payload as hex: up to about 8 times
	// its payload while it is decoded), the Kafka client's encoded batches
	// and the runtime: the process's peak memory stays under
	// 2 × (MaxInFlightBytes + 8 × the largest message) + 64 MiB with Go's
	// default garbage collector, plus the table path's batch while
	// aggregates are deferred (docs/cdc.md, "Memory"). Defaults to 64 MiB.
	MaxInFlightBytes int64
	// PublishTimeout bounds the wait for the broker's acks of one publish
	// call; a timeout counts as "broker unavailable". Defaults to 15s.
	PublishTimeout time.Duration
	// StatusInterval is how often the relay reports its confirmed position
	// to the server (standby status update). Defaults to 1s.
	StatusInterval time.Duration
	// HeartbeatInterval is how long the stream may be silent before the
	// relay writes a heartbeat into the WAL (pg_logical_emit_message), so
	// that the slot's confirmed position moves on while the outbox is idle.
	// Defaults to 10s.
	HeartbeatInterval time.Duration
	// StandbyInterval is how often a standby relay tries to become the
	// active one (at least five times per LeaderLease), and how long the
	// relay waits before reconnecting after a lost connection. Defaults to
	// 2s.
	StandbyInterval time.Duration
	// LeaderLease is the lease of the active relay: it renews it every
	// third of LeaderLease on Pool, whether it streams, idles or waits for
	// the broker. A standby that finds it expired (the active relay hangs:
	// stopped, or cut off from the database) takes over within about
	// LeaderLease plus a standby's check (at most LeaderLease/5): it
	// terminates the hung relay's replication connection, which frees the
	// slot, and streams. The hung relay's records are fenced from the
	// takeover on (see "Slot safety" in the package documentation).
	// Terminating another relay's connection takes the same role as that
	// relay's, or pg_signal_backend. Defaults to 5s; at least 1s.
	LeaderLease time.Duration
	// TablePathInterval is how often the table path looks for due messages
	// of deferred aggregates. Defaults to 1s.
	TablePathInterval time.Duration
	// LagLogInterval is how often the active relay logs the slot's lag.
	// Defaults to 1m.
	LagLogInterval time.Duration

	// Lease, MaxAttempts, RetryBase, RetryMax and UnavailableBackoffMax
	// have the meaning of relay.Config: the table path uses all of them,
	// the stream's relay core uses MaxAttempts, RetryBase and RetryMax for
	// the first retry it schedules, UnavailableBackoffMax for its pause
	// while the broker is unreachable, and the longer of Lease and twice
	// PublishTimeout as the lease of its claims (in memory: nobody else can
	// take a message of the stream; past it a session's end logs a
	// warning and keeps waiting for the claim). They
	// default to 30s, 10, 1s, 300s and 30s.
	Lease                 time.Duration
	MaxAttempts           int
	RetryBase, RetryMax   time.Duration
	UnavailableBackoffMax time.Duration
	// ShutdownTimeout bounds how long Stop waits for outstanding acks.
	// Defaults to 10s.
	ShutdownTimeout time.Duration

	// Logger receives structured logs. Defaults to slog.Default().
	Logger *slog.Logger
	// Hooks observe the relay. Optional.
	Hooks Hooks
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.ConnString == "" && c.Pool != nil {
		c.ConnString = c.Pool.Config().ConnString()
	}
	conf.Default(&c.Schema, pgstore.DefaultSchema)
	conf.Default(&c.Slot, DefaultSlot(c.Schema))
	conf.Default(&c.Publication, c.Slot)
	if c.ID == "" {
		c.ID = conf.InstanceID()
	}
	conf.Default(&c.BatchSize, DefaultBatchSize)
	conf.Default(&c.MaxRun, DefaultMaxRun)
	conf.Default(&c.MaxRunBytes, DefaultMaxRunBytes)
	conf.Default(&c.MaxInFlight, DefaultInFlightBatches*c.BatchSize)
	conf.Default(&c.MaxInFlightBytes, DefaultMaxInFlightBytes)
	conf.Default(&c.PublishTimeout, DefaultPublishTimeout)
	conf.Default(&c.StatusInterval, DefaultStatusInterval)
	conf.Default(&c.HeartbeatInterval, DefaultHeartbeatInterval)
	conf.Default(&c.StandbyInterval, DefaultStandbyInterval)
	conf.Default(&c.LeaderLease, DefaultLeaderLease)
	conf.Default(&c.TablePathInterval, DefaultTablePathInterval)
	conf.Default(&c.LagLogInterval, DefaultLagLogInterval)
	conf.Default(&c.Lease, DefaultLease)
	conf.Default(&c.MaxAttempts, DefaultMaxAttempts)
	conf.Default(&c.RetryBase, DefaultRetryBase)
	conf.Default(&c.RetryMax, DefaultRetryMax)
	conf.Default(&c.UnavailableBackoffMax, DefaultUnavailableBackoffMax)
	conf.Default(&c.ShutdownTimeout, DefaultShutdownTimeout)
	conf.Default(&c.Logger, slog.Default())
	return c
}

// DefaultSlot is the default slot (and publication) name for an outbox in
// schema: "outbox_" + schema, or, when that is longer than 63 bytes, its
// first 46 bytes and a hash of the whole.
func DefaultSlot(schema string) string { return sqlname.Fit("outbox_" + strings.ToLower(schema)) }

// validate checks c after defaults and names the first bad field.
func (c Config) validate() error {
	return conf.First(ErrInvalidConfig,
		conf.Required("Pool", c.Pool != nil),
		conf.Required("Sink", c.Sink != nil),
		conf.Rule("ConnString", c.ConnString != "", "is required when Pool has none"),
		sqlname.Schema("Schema", c.Schema),
		conf.Rule("Slot", nameRe.MatchString(c.Slot), "%q must match %s", c.Slot, nameRe),
		conf.Rule("Publication", nameRe.MatchString(c.Publication), "%q must match %s", c.Publication, nameRe),
		conf.Rule("Cleanup", c.Cleanup == CleanupMarkSent || c.Cleanup == CleanupDelete,
			"must be CleanupMarkSent or CleanupDelete, not %d", int(c.Cleanup)),
		conf.AtLeast("BatchSize", c.BatchSize, 1),
		conf.Rule("MaxRun", c.MaxRun >= 1 && c.MaxRun <= c.BatchSize,
			"must be at least 1 and at most BatchSize (%d), not %d", c.BatchSize, c.MaxRun),
		conf.Rule("MaxRun", c.MaxRun == 1 || isRunSink(c.Sink),
			"above 1 requires a Sink that implements sink.RunSink (publishes a run without a gap); %T does not", c.Sink),
		conf.NotNegative("MaxRunBytes", c.MaxRunBytes),
		conf.AtLeast("MaxInFlight", c.MaxInFlight, 1),
		conf.AtLeast("MaxInFlightBytes", c.MaxInFlightBytes, 1),
		conf.Positive("PublishTimeout", c.PublishTimeout),
		conf.AtLeast("StatusInterval", c.StatusInterval, time.Millisecond),
		conf.AtLeast("HeartbeatInterval", c.HeartbeatInterval, time.Millisecond),
		conf.AtLeast("StandbyInterval", c.StandbyInterval, time.Millisecond),
		conf.AtLeast("LeaderLease", c.LeaderLease, time.Second),
		conf.AtLeast("TablePathInterval", c.TablePathInterval, time.Millisecond),
		conf.AtLeast("LagLogInterval", c.LagLogInterval, time.Millisecond),
		conf.AtLeast("Lease", c.Lease, time.Second),
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

package chaos

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Defaults of [Config].
const (
	DefaultDatabaseURL   = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	DefaultDuration      = 2 * time.Minute
	DefaultRelays        = 3
	DefaultOrderServices = 2
	DefaultClients       = 8
	DefaultRate          = 60
	DefaultProbeRate     = 40
	DefaultHotAggregates = 4
	DefaultLease         = 3 * time.Second
	DefaultFaultGap      = 3 * time.Second
	DefaultPoison        = 3
	DefaultMaxCopies     = 3
	DefaultDrainBound    = 90 * time.Second
	DefaultDrainTimeout  = 3 * time.Minute
	DefaultSampleEvery   = time.Minute
)

// Strategies of the relay (Config.Strategy).
const (
	// StrategyClaim: every relay claims due messages, publishes and marks
	// them (the relay's default).
	StrategyClaim = "claim"
	// StrategyCursor: the outbox is in cursor mode (pgstore EnableCursor);
	// one relay leads a cursor over the QUEUED messages, the others stand
	// by.
	StrategyCursor = "cursor"
	// StrategyCDC: the relays run with --mode cdc; one streams from the
	// replication slot, the others stand by.
	StrategyCDC = "cdc"
)

// Strategies lists the strategies in the order [StrategyForSeed] picks them.
var Strategies = []string{StrategyClaim, StrategyCursor, StrategyCDC}

// StrategyForSeed is the strategy of a run whose Config.Strategy is empty:
// Strategies[seed mod 3], so that runs with random seeds cover every
// strategy and a seed alone replays its run.
func StrategyForSeed(seed int64) string {
	n := int64(len(Strategies))
	return Strategies[((seed%n)+n)%n]
}

// ErrInvalidConfig is wrapped by the error of [Run] for a bad [Config].
var ErrInvalidConfig = errors.New("chaos: invalid config")

// Config configures a run. The zero value (with Seed set, or not) is a
// two-minute run against the local test database.
type Config struct {
	// DatabaseURL is the PostgreSQL server, as a postgres:// URL (the
	// processes reach it through proxies, so its host and port are
	// rewritten). Defaults to DefaultDatabaseURL. The run uses schemas of
	// its own, named chaos_<hex>, dropped after a passing run.
	DatabaseURL string
	// Binary is the outbox-lab binary every process runs (its relay,
	// broker and example commands). It must be built with -tags failpoints
	// for the kill-after-ack and kill-in-mark faults. Defaults to "": Run
	// builds one from ./cmd/outbox-lab with 'go build -tags failpoints'
	// into its work directory (the Go toolchain and this module's source
	// tree must be at hand, as in a checkout).
	Binary string
	// Seed makes the workload and the fault schedule reproducible.
	// Defaults to 0: a random seed, printed and reported.
	Seed int64
	// Duration is how long the load and the faults run. Defaults to 2m.
	Duration time.Duration
	// Relays, OrderServices and Clients are the number of relay processes,
	// order service processes and concurrent HTTP clients. Defaults 3, 2, 8.
	Relays, OrderServices, Clients int
	// Rate is the HTTP requests per second of all clients together, and
	// ProbeRate the direct enqueue transactions per second of the probers:
	// arrivals at random (Poisson) times, so that the load is one the
	// system can carry and the backlog at the end comes from the faults.
	// Defaults 60 and 40.
	Rate, ProbeRate float64
	// HotAggregates is the number of hot probe aggregates every prober
	// writes to (plus fresh cold ones). Defaults to 4.
	HotAggregates int
	// Lease is the relays' --lease. Defaults to 3s.
	Lease time.Duration
	// FaultGap is the mean gap between two faults. Defaults to 3s.
	FaultGap time.Duration
	// Poison is the number of oversized messages injected (each must
	// become a dead letter). Defaults to 3; a negative value injects none.
	Poison int
	// PGRestart enables restarts of the PostgreSQL server itself
	// (pg_ctlcluster fast and immediate). Off by default: the server is
	// usually shared with other tests.
	PGRestart bool
	// Strategy is the relay strategy under test: StrategyClaim,
	// StrategyCursor (the outbox is put in cursor mode right after its
	// migration, before any process starts) or StrategyCDC (the relays run
	// with --mode cdc). The checks are the same for all; the faults aimed
	// at one relay aim at the leader where there is one (docs/chaos.md,
	// "Strategies"). Defaults to "": StrategyForSeed of the run's seed.
	Strategy string
	// PGCluster is the "version name" of the cluster pg_ctlcluster
	// restarts. Defaults to "15 main".
	PGCluster string
	// MaxCopies bounds the copies of one event on a topic. Defaults to 3.
	MaxCopies int
	// Grace extends each fault window for the duplicates it may cause.
	// Defaults to 3 leases plus 5s.
	Grace time.Duration
	// DrainBound is the invariant's bound on the drain after the heal.
	// Defaults to 90s.
	DrainBound time.Duration
	// DrainTimeout is how long the harness waits for the drain before it
	// checks anyway. Defaults to 3m.
	DrainTimeout time.Duration
	// WorkDir holds the binary, the broker's data and the processes' logs.
	// Defaults to a new temporary directory, removed after a passing run.
	WorkDir string
	// SampleEvery is how often the resources of every relay process
	// (resident memory, goroutines, database connections) are sampled while
	// the load runs; they are also sampled when the load ends and after the
	// drain. Defaults to 1m.
	SampleEvery time.Duration
	// KeepSchemas keeps the run's schemas after a passing run too.
	KeepSchemas bool
	// Out receives the progress lines and the report's table. Defaults to
	// io.Discard.
	Out io.Writer
}

func (c Config) withDefaults() Config {
	if c.DatabaseURL == "" {
		c.DatabaseURL = DefaultDatabaseURL
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if c.Relays == 0 {
		c.Relays = DefaultRelays
	}
	if c.OrderServices == 0 {
		c.OrderServices = DefaultOrderServices
	}
	if c.Clients == 0 {
		c.Clients = DefaultClients
	}
	if c.Rate == 0 {
		c.Rate = DefaultRate
	}
	if c.ProbeRate == 0 {
		c.ProbeRate = DefaultProbeRate
	}
	if c.HotAggregates == 0 {
		c.HotAggregates = DefaultHotAggregates
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.FaultGap == 0 {
		c.FaultGap = DefaultFaultGap
	}
	if c.Poison == 0 {
		c.Poison = DefaultPoison
	}
	if c.PGCluster == "" {
		c.PGCluster = "15 main"
	}
	if c.MaxCopies == 0 {
		c.MaxCopies = DefaultMaxCopies
	}
	if c.Grace == 0 {
		c.Grace = 3*c.Lease + 5*time.Second
	}
	if c.DrainBound == 0 {
		c.DrainBound = DefaultDrainBound
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.SampleEvery == 0 {
		c.SampleEvery = DefaultSampleEvery
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	return c
}

func (c Config) validate() error {
	bad := func(field, rule string, args ...any) error {
		return fmt.Errorf("%w: %s %s", ErrInvalidConfig, field, fmt.Sprintf(rule, args...))
	}
	u, err := url.Parse(c.DatabaseURL)
	switch {
	case err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "":
		return bad("DatabaseURL", "must be a postgres://host:port/db URL")
	case c.Duration < 10*time.Second:
		return bad("Duration", "must be at least 10s, not %s", c.Duration)
	case c.Relays < 2 || c.Relays > 9:
		return bad("Relays", "must be from 2 to 9, not %d", c.Relays)
	case c.OrderServices < 1 || c.OrderServices > 9:
		return bad("OrderServices", "must be from 1 to 9, not %d", c.OrderServices)
	case c.Clients < 1:
		return bad("Clients", "must be at least 1, not %d", c.Clients)
	case c.Rate < 0 || c.ProbeRate < 0:
		return bad("Rate", "and ProbeRate must be positive, not %v and %v", c.Rate, c.ProbeRate)
	case c.HotAggregates < 1:
		return bad("HotAggregates", "must be at least 1, not %d", c.HotAggregates)
	case c.Lease < time.Second:
		return bad("Lease", "must be at least 1s, not %s", c.Lease)
	case c.FaultGap < 100*time.Millisecond:
		return bad("FaultGap", "must be at least 100ms, not %s", c.FaultGap)
	case c.MaxCopies < 1:
		return bad("MaxCopies", "must be at least 1, not %d", c.MaxCopies)
	case c.Grace < 0:
		return bad("Grace", "must not be negative, not %s", c.Grace)
	case c.Strategy != "" && !slices.Contains(Strategies, c.Strategy):
		return bad("Strategy", "must be %s, or empty for the seed's, not %q", strings.Join(Strategies, ", "), c.Strategy)
	case c.SampleEvery < time.Second:
		return bad("SampleEvery", "must be at least 1s, not %s", c.SampleEvery)
	case c.DrainBound <= 0 || c.DrainTimeout < c.DrainBound:
		return bad("DrainTimeout", "must be at least DrainBound (%s), and both positive; not %s", c.DrainBound, c.DrainTimeout)
	}
	return nil
}

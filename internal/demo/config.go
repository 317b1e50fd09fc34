package demo

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox/sink/kafka"
)

// Defaults of [Config].
const (
	// DefaultDuration is the default of Config.Duration.
	DefaultDuration = 20 * time.Second
	// DefaultRate is the default of Config.Rate: orders per second.
	DefaultRate = 20.0
	// DefaultListen is the default of Config.Listen: any free port on the
	// loopback interface.
	DefaultListen = "127.0.0.1:0"
	// DefaultSchemaPrefix is the default of Config.SchemaPrefix.
	DefaultSchemaPrefix = "outbox_demo"
	// DefaultDrainTimeout is the default of Config.DrainTimeout.
	DefaultDrainTimeout = 60 * time.Second
	// DefaultLease is the relays' lease in the demo: short, so that the
	// messages of a killed relay come back within seconds.
	DefaultLease = 3 * time.Second
)

// The demo's topics and consumer groups. They are its own, so that a demo
// pointed at a real Kafka cluster stays out of the way of other systems.
const (
	TopicOrders      = "outbox-demo.orders"
	TopicInventory   = "outbox-demo.inventory"
	GroupBilling     = "outbox-demo.billing"
	GroupInventory   = "outbox-demo.inventory"
	auditClientID    = "outbox-demo-audit"
	relayIDPrefix    = "outbox-demo"
	consumerIDPrefix = "outbox-demo-"
)

// ErrInvalidConfig is wrapped by Run's error for a Config it cannot use; the
// message names the field.
var ErrInvalidConfig = errors.New("demo: invalid config")

// ErrInvariant is wrapped by Run's error when the run ended but an invariant
// failed; the Summary returned with it lists them.
var ErrInvariant = errors.New("demo: invariant violated")

// Config configures a demo run. The zero value is a 20 s run on SQLite and
// the embedded broker in a temporary directory.
type Config struct {
	// DataDir holds the SQLite files, the broker's data and demo.log (the
	// components' logs). It is created if missing; files from an earlier
	// run are reused (the checks look at this run's orders only). Defaults
	// to a new temporary directory, removed at the end if every check
	// passed and kept (and named in the summary) otherwise.
	DataDir string
	// Duration is how long the load runs; then the backlog drains and the
	// checks run. Defaults to 20s.
	Duration time.Duration
	// Rate is how many orders per second the load generator places.
	// Defaults to 20.
	Rate float64
	// Chaos kills and restarts relays and stops and restarts the embedded
	// broker at random moments. Defaults to false.
	Chaos bool
	// Seed seeds the load and the chaos schedule. Defaults to 0: a random
	// seed, printed.
	Seed int64
	// DatabaseURL runs the services on PostgreSQL instead of SQLite, each in
	// a schema of its own (see SchemaPrefix). Defaults to "": SQLite.
	DatabaseURL string
	// SchemaPrefix names the PostgreSQL schemas: <prefix>_orders,
	// <prefix>_billing, <prefix>_inventory. It must match
	// ^[a-z_][a-z0-9_]{0,40}$. Defaults to "outbox_demo".
	SchemaPrefix string
	// KafkaBrokers are the seed brokers of a real Kafka cluster to use
	// instead of the embedded broker (the topics TopicOrders and
	// TopicInventory are created if the cluster allows it). Chaos then
	// kills relays only. Defaults to none: the embedded broker.
	KafkaBrokers []string
	// KafkaSecurity configures TLS and SASL for every Kafka client of the
	// demo (the relays' producers, the consumers and the topic reader),
	// as for the relay's sink. It requires KafkaBrokers: the embedded
	// broker speaks plaintext only. Defaults to plaintext without
	// authentication.
	KafkaSecurity kafka.Security
	// Listen is the host:port of the order service's HTTP API. Defaults to
	// "127.0.0.1:0" (a free port, printed).
	Listen string
	// DrainTimeout bounds the wait for the backlog after the load stopped.
	// Defaults to 60s.
	DrainTimeout time.Duration
	// Progress says how often the progress line is written. Defaults to
	// 250ms when the output is a terminal (one line, rewritten with \r)
	// and 2s otherwise (one line each time).
	Progress time.Duration
	// Logger receives the components' logs. Defaults to a text logger
	// writing to demo.log in DataDir.
	Logger *slog.Logger
}

var schemaPrefixRe = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,40}$`)

func (c Config) withDefaults() Config {
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if c.Rate == 0 {
		c.Rate = DefaultRate
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.SchemaPrefix == "" {
		c.SchemaPrefix = DefaultSchemaPrefix
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	return c
}

func (c Config) validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Duration < 0:
		return bad("Duration", "must not be negative, not %s", c.Duration)
	case c.Rate <= 0 || c.Rate > 1000:
		return bad("Rate", "must be above 0 and at most 1000 orders per second, not %g", c.Rate)
	case c.DrainTimeout <= 0:
		return bad("DrainTimeout", "must be positive, not %s", c.DrainTimeout)
	case c.Progress < 0:
		return bad("Progress", "must not be negative, not %s", c.Progress)
	case !schemaPrefixRe.MatchString(c.SchemaPrefix) || strings.HasPrefix(c.SchemaPrefix, "pg_"):
		return bad("SchemaPrefix", "%q must match %s and not start with pg_", c.SchemaPrefix, schemaPrefixRe)
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return bad("Listen", "must be a host:port such as 127.0.0.1:0, not %q", c.Listen)
	}
	if c.DatabaseURL != "" {
		if _, err := pgxpool.ParseConfig(c.DatabaseURL); err != nil {
			// The parse error may quote the URL, password included: name the field only.
			return bad("DatabaseURL", "is not a valid PostgreSQL URL or key=value DSN")
		}
	}
	for i, b := range c.KafkaBrokers {
		if _, _, err := net.SplitHostPort(b); err != nil {
			return bad(fmt.Sprintf("KafkaBrokers[%d]", i), "must be a host:port, not %q", b)
		}
	}
	if c.KafkaSecurity != (kafka.Security{}) {
		if len(c.KafkaBrokers) == 0 {
			return bad("KafkaSecurity", "needs KafkaBrokers: the embedded broker speaks plaintext only")
		}
		// Opts names the Security field at fault and never the password.
		if _, err := c.KafkaSecurity.Opts(); err != nil {
			return fmt.Errorf("%w: KafkaSecurity: %w", ErrInvalidConfig, err)
		}
	}
	return nil
}

package lab

import (
	"errors"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/outbox-dev/outbox/internal/cli"
	"github.com/outbox-dev/outbox/internal/demo"
)

func newDemoCommand(a *cli.App) *cobra.Command {
	var cfg demo.Config
	var kf cli.KafkaFlags // only its TLS and SASL flags are added
	cmd := &cobra.Command{
		Use:     "demo",
		GroupID: groupLab,
		Short:   "Run the whole order system in one process, with nothing installed, and check it",
		Long: `demo runs the reference order system in one process: the order service
(HTTP on 127.0.0.1, port printed), its outbox and relay, the billing and
inventory consumers with their inboxes, the inventory's own outbox and relay,
and the embedded Kafka-protocol broker, on SQLite files in a data directory.
A load generator places orders at a steady rate (--rate), pays, ships and
cancels some, and sends invalid ones that must be refused.

One line shows the progress: orders placed, the outboxes' pending, sent and
dead messages, invoices, duplicates absorbed by the consumers, and the
latency from an order's creation to its invoice. After --duration (or
Ctrl-C) the load stops, the backlog drains, and a summary checks the
invariants: every accepted order has its events, one invoice and one
reservation; nothing is lost; duplicates are absorbed; no dead letters. The
exit status is 1 if one fails.

--chaos kills relays at random moments (their claimed messages come back
after the lease, sometimes after the broker already has them: duplicates)
and stops the broker for a few seconds; the invariants must hold anyway.
--db and --kafka-brokers run the same on PostgreSQL (schemas
<--schema-prefix>_orders, _billing, _inventory) and a real Kafka cluster
(topics outbox-demo.orders and outbox-demo.inventory); the --kafka-tls*
and --kafka-sasl-* flags, the same as the relay's, secure every Kafka
client of the demo. They require --kafka-brokers: the embedded broker
speaks plaintext only.`,
		Example: `  outbox-lab demo
  outbox-lab demo --chaos --duration 60s
  outbox-lab demo --db postgres://postgres@127.0.0.1:5432/test --kafka-brokers 127.0.0.1:9092
  OUTBOX_KAFKA_SASL_PASSWORD=... outbox-lab demo --kafka-brokers kafka-1:9093 --kafka-tls \
    --kafka-sasl-mechanism SCRAM-SHA-512 --kafka-sasl-username demo`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case cfg.Duration <= 0:
				return cli.FlagError("duration", "must be positive, not %s", cfg.Duration)
			case cfg.Rate <= 0 || cfg.Rate > 1000:
				return cli.FlagError("rate", "must be above 0 and at most 1000 orders per second, not %g", cfg.Rate)
			case cfg.DrainTimeout <= 0:
				return cli.FlagError("drain-timeout", "must be positive, not %s", cfg.DrainTimeout)
			}
			if err := demoKafkaSecurity(cmd.Flags(), &kf, &cfg); err != nil {
				return err
			}
			_, err := demo.Run(cmd.Context(), cfg, a.Stdout())
			if errors.Is(err, demo.ErrInvalidConfig) {
				return demoFlagError(err)
			}
			return err
		},
	}
	fs := cmd.Flags()
	fs.DurationVar(&cfg.Duration, "duration", demo.DefaultDuration, "how long the load runs; then the backlog drains and the checks run")
	fs.Float64Var(&cfg.Rate, "rate", demo.DefaultRate, "orders placed per second")
	fs.BoolVar(&cfg.Chaos, "chaos", false, "kill relays and stop the embedded broker at random moments")
	fs.Int64Var(&cfg.Seed, "seed", 0, "seed of the load and the chaos schedule (default: random, printed)")
	fs.StringVar(&cfg.DataDir, "data-dir", "", "`directory` of the SQLite files, the broker's data and demo.log (default: a temporary one, removed after a passing run)")
	fs.StringVar(&cfg.DatabaseURL, "db", "", "PostgreSQL `URL` to run on instead of SQLite")
	fs.StringVar(&cfg.SchemaPrefix, "schema-prefix", demo.DefaultSchemaPrefix, "`prefix` of the PostgreSQL schemas, with --db")
	fs.StringSliceVar(&cfg.KafkaBrokers, "kafka-brokers", nil, "comma-separated `host:port` of a real Kafka cluster to use instead of the embedded broker")
	fs.StringVar(&cfg.Listen, "listen", demo.DefaultListen, "`host:port` of the order service's HTTP API (port 0 picks a free port)")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", demo.DefaultDrainTimeout, "longest wait for the backlog to drain after the load stopped")
	cli.AddKafkaSecurityFlags(fs, &kf) // the relay's TLS and SASL flags; the other --kafka-* flags do not apply
	cli.MarkSensitiveURL(fs, "db")
	return cmd
}

// demoKafkaSecurity checks the TLS and SASL flags and sets
// cfg.KafkaSecurity, before anything starts. They require --kafka-brokers,
// and kafka.Security's own checks (files readable, a password with a
// mechanism, ...) are reported naming the flag.
func demoKafkaSecurity(fs *pflag.FlagSet, kf *cli.KafkaFlags, cfg *demo.Config) error {
	cfg.KafkaSecurity = kf.Security()
	if len(cfg.KafkaBrokers) == 0 {
		for _, name := range cli.KafkaSecurityFlags() {
			// Set by the flag or its environment variable: not the default.
			if f := fs.Lookup(name); f.Value.String() != f.DefValue {
				return cli.FlagError(name, "needs --kafka-brokers: the embedded broker speaks plaintext only")
			}
		}
		return nil
	}
	if _, err := cfg.KafkaSecurity.Opts(); err != nil {
		return cli.KafkaConfigError(err)
	}
	return nil
}

// demoFlagError makes a demo.Config error a usage error. The field names
// in demo's messages match the flags' meaning; --db's value is never
// repeated, since a URL may hold a password.
func demoFlagError(err error) error {
	if strings.Contains(err.Error(), "DatabaseURL") {
		return cli.UsageError(errors.New("--db is not a valid PostgreSQL URL"))
	}
	return cli.UsageError(err)
}

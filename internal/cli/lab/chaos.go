package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/outbox-dev/outbox/internal/chaos"
	"github.com/outbox-dev/outbox/internal/cli"
)

func newChaosCommand(a *cli.App) *cobra.Command {
	var (
		cfg    chaos.Config
		report string
		cursor bool
	)
	cmd := &cobra.Command{
		Use:     "chaos",
		GroupID: groupLab,
		Short:   "Run the whole order system under random faults and check its invariants",
		Long: `chaos runs the order system as real processes (two order services, several
relays, the billing and inventory consumers, and an embedded broker with a
data directory) against PostgreSQL, each link through an embedded
toxiproxy, drives a seeded workload and injects faults from a schedule
derived from the same seed: SIGKILL of relays (at random, right after the
broker acknowledged a record the relay has not marked, and inside the mark
transaction), a relay paused past its lease then resumed, rolling restarts,
consumer and order service kills, the broker stopped for 10-20 s, latency,
resets, blackholes and bandwidth limits on links, transactions held open
(and some rolled back), oversized poison messages, and with --pg-restart
restarts of PostgreSQL itself.

--strategy picks the relay strategy under test: claim (the relay's default),
cursor (the outbox in cursor mode: one relay leads, the others stand by) or
cdc (the relays run with --mode cdc: one streams from the slot, the others
stand by). Without it the seed picks one (seed mod 3: claim, cursor, cdc),
printed with the seed. Where one relay leads, the kills after the ack and
the pauses aim at the leader; in cdc mode, which has no failpoints on its
stream, the leader is killed at random moments instead.

Then it heals everything, waits for the backlog to drain, reads the topics
with its own consumer and the consumers' tables, and checks: no committed
event lost, no phantom event, per-aggregate order of first deliveries,
duplicates only inside fault windows and at most --max-copies, exactly one
business effect per event, dead letters only for the poison, and a drain
within --drain-bound, and no relay's memory, goroutines or database
connections grew (sampled every --sample-every). It prints a table (and --report writes JSON) ending
in PASS or FAIL naming each violated invariant; it exits 1 on FAIL.

Every process runs one outbox-lab binary built with -tags failpoints (its
relay, broker and example commands): --binary, or one the harness builds
from ./cmd/outbox-lab, which needs the Go toolchain and this repository's
source. --database-url defaults to the local test database; the run
creates and drops schemas named chaos_*. --pg-restart restarts the whole
server: never use it on a server others are using. docs/chaos.md has the
details.`,
		Example: `  outbox-lab chaos                                  # two minutes, random seed (and so strategy)
  outbox-lab chaos --seed 42 --duration 5m --report chaos.json
  outbox-lab chaos --strategy cdc --duration 1m
  outbox-lab chaos --seed 42 --pg-restart           # only on a server of your own`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runChaos(cmd.Context(), a, cfg, cursor, report)
		},
	}
	addChaosFlags(cmd.Flags(), &cfg, &cursor, &report)
	return cmd
}

// runChaos runs the harness with cfg (and --cursor, --report), prints the
// table and writes the report; a FAIL is an error naming the seed, the
// strategy and the violated invariants.
func runChaos(ctx context.Context, a *cli.App, cfg chaos.Config, cursor bool, report string) error {
	if cursor {
		if cfg.Strategy != "" && cfg.Strategy != chaos.StrategyCursor {
			return cli.FlagError("cursor", "is --strategy cursor; it contradicts --strategy %s", cfg.Strategy)
		}
		cfg.Strategy = chaos.StrategyCursor
	}
	cfg.DatabaseURL = a.DatabaseURL()
	cfg.Out = a.Stdout()
	rep, err := chaos.Run(ctx, cfg)
	if errors.Is(err, chaos.ErrInvalidConfig) {
		return chaosConfigError(err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(a.Stdout())
	rep.WriteTable(a.Stdout())
	if report != "" {
		data, err := rep.JSON()
		if err != nil {
			return fmt.Errorf("chaos: report: %w", err)
		}
		if err := os.WriteFile(report, append(data, '\n'), 0o644); err != nil {
			return fmt.Errorf("chaos: write the report: %w", err)
		}
	}
	if !rep.Pass {
		if rep.WorkDir != "" {
			fmt.Fprintf(a.Stdout(), "logs of the processes: %s\n", rep.WorkDir)
		}
		return fmt.Errorf("chaos: FAIL (seed %d, strategy %s): %s", rep.Seed, rep.Strategy, strings.Join(rep.Violated(), ", "))
	}
	return nil
}

// addChaosFlags adds the chaos command's flags for cfg, the deprecated
// --cursor and --report.
func addChaosFlags(fs *pflag.FlagSet, cfg *chaos.Config, cursor *bool, report *string) {
	fs.Int64Var(&cfg.Seed, "seed", 0, "seed of the workload and the fault schedule (default: random, printed)")
	fs.DurationVar(&cfg.Duration, "duration", chaos.DefaultDuration, "how long the load and the faults run")
	fs.IntVar(&cfg.Relays, "relays", chaos.DefaultRelays, "relay processes (2 to 9)")
	fs.IntVar(&cfg.OrderServices, "order-services", chaos.DefaultOrderServices, "order service processes (1 to 9)")
	fs.IntVar(&cfg.Clients, "clients", chaos.DefaultClients, "concurrent HTTP clients")
	fs.Float64Var(&cfg.Rate, "rate", chaos.DefaultRate, "HTTP requests per second of all clients together (random arrivals)")
	fs.Float64Var(&cfg.ProbeRate, "probe-rate", chaos.DefaultProbeRate, "direct enqueue transactions per second")
	fs.IntVar(&cfg.HotAggregates, "hot-aggregates", chaos.DefaultHotAggregates, "hot probe aggregates (and hot orders x2) the workload concentrates on")
	fs.DurationVar(&cfg.Lease, "lease", chaos.DefaultLease, "the relays' --lease")
	fs.DurationVar(&cfg.FaultGap, "fault-gap", chaos.DefaultFaultGap, "mean gap between two faults")
	fs.IntVar(&cfg.Poison, "poison", chaos.DefaultPoison, "oversized poison messages to inject (negative: none)")
	fs.StringVar(&cfg.Strategy, "strategy", "", "relay `strategy` under test: claim, cursor or cdc (default: the seed's, seed mod 3)")
	fs.BoolVar(cursor, "cursor", false, "the same as --strategy cursor")
	_ = fs.MarkDeprecated("cursor", "use --strategy cursor")
	fs.DurationVar(&cfg.SampleEvery, "sample-every", chaos.DefaultSampleEvery, "how often to sample each relay's memory, goroutines and database connections while the load runs")
	fs.BoolVar(&cfg.PGRestart, "pg-restart", false, "also restart PostgreSQL (pg_ctlcluster, fast and immediate); only on a server of your own")
	fs.StringVar(&cfg.PGCluster, "pg-cluster", "15 main", "`version name` of the cluster --pg-restart restarts")
	fs.IntVar(&cfg.MaxCopies, "max-copies", chaos.DefaultMaxCopies, "most copies of one event allowed on a topic")
	fs.DurationVar(&cfg.Grace, "grace", 0, "how long after a fault a duplicate it caused may appear (default 3 leases + 5s)")
	fs.DurationVar(&cfg.DrainBound, "drain-bound", chaos.DefaultDrainBound, "longest allowed drain after the heal")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", chaos.DefaultDrainTimeout, "how long to wait for the drain before checking anyway")
	fs.StringVar(&cfg.Binary, "binary", "", "outbox-lab `binary` built with -tags failpoints, run as every process (default: build ./cmd/outbox-lab)")
	fs.StringVar(&cfg.WorkDir, "work-dir", "", "`directory` for the binary, the broker's data and the logs (default: a temporary one, removed after a PASS)")
	fs.BoolVar(&cfg.KeepSchemas, "keep-schemas", false, "keep the run's schemas after a PASS too")
	fs.StringVar(report, "report", "", "write the report as JSON to this `file`")
}

// chaosFieldFlags maps the chaos.Config fields its errors name to flags.
var chaosFieldFlags = map[string]string{
	"DatabaseURL": "database-url", "Duration": "duration", "Relays": "relays", "OrderServices": "order-services",
	"Clients": "clients", "Rate": "rate", "HotAggregates": "hot-aggregates", "Lease": "lease", "FaultGap": "fault-gap",
	"MaxCopies": "max-copies", "Grace": "grace", "DrainTimeout": "drain-timeout", "Strategy": "strategy",
	"SampleEvery": "sample-every",
}

// chaosConfigError points a chaos.Config error at the flag of the field it
// names.
func chaosConfigError(err error) error {
	_, rest, _ := strings.Cut(err.Error(), "invalid config: ")
	field, _, _ := strings.Cut(rest, " ")
	if flag, ok := chaosFieldFlags[field]; ok {
		return cli.UsageError(fmt.Errorf("--%s: %w", flag, err))
	}
	return cli.UsageError(err)
}

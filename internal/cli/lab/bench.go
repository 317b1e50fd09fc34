package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/outbox-dev/outbox/internal/bench"
	"github.com/outbox-dev/outbox/internal/cli"
)

// benchFlags are the flags of 'outbox-lab bench' besides the relay's.
type benchFlags struct {
	quick        bool
	json         bool
	save         string
	phases       []string
	kafkaBrokers []string
	topic        string
	backlog      int
	relays       int
	writers      int
	latWriters   int
	rate         int
	duration     time.Duration
	idleWindow   time.Duration
	historyRows  int
	claims       int
	aggregates   int
	payloadBytes int
	relayBinary  string
	stallTimeout time.Duration
	vacuumEvery  time.Duration
	cpuProfile   string
	mode         string
	cursor       bool
	hotStrats    []string
	hotBacklog   int
	hotLimit     time.Duration
}

func newBenchCommand(a *cli.App) *cobra.Command {
	var bf benchFlags
	var rf cli.RelayFlags
	cmd := &cobra.Command{
		Use:     "bench",
		GroupID: groupLab,
		Short:   "Measure the relay against PostgreSQL and Kafka, with the performance goals",
		Long: `bench measures the outbox on a real PostgreSQL server and a Kafka-protocol
broker (an embedded one it starts, or --kafka-brokers) and prints, side by
side, what docs/performance.md describes:

  drain     the database-only ceiling (the store's claim and mark with no
            broker) and the relay's end-to-end drain of --backlog messages,
            with one relay and with --relays relays
  steady    --writers writers committing business transactions at full
            speed, without and with a relay: throughput loss, backlog trend,
            commit-to-ack per message
  latency   commit-to-ack at a fixed --rate, by --latency-writers writers
  hot       hot aggregates, per --hot-strategies: one relay draining
            --hot-backlog messages spread over --aggregates, on 1, on 10,
            and Zipf-skewed (s=1.1) over --aggregates, each skewed drain for
            at most --hot-drain-limit; commit-to-ack at --rate with every
            message on one aggregate
  idle      what an idle relay sends to PostgreSQL
  claim     claim times on an empty table, with --history-rows sent rows,
            right after as many rows were marked sent (unvacuumed), and on a
            backlog whose planner statistics are those of an empty table
  memory    peak memory of a relay process ('relay' of this binary, or
            of --relay-binary, say an outbox build) on a small and a large
            backlog

and the goals with PASS or MISS. A full run takes several minutes; --quick
uses small sizes and takes about one. A progress line goes to stderr, the
report to stdout: a table, or JSON with --json.

--database-url is required. Use a test database: bench loads the server
hard, and creates and drops schemas named outbox_bench_* (it touches no
other schema). The relay flags (--batch-size, --workers, --poll-interval,
...) configure every relay it runs, and the ceiling uses the same batch size
and as many loops as the relays have workers. The figures depend on what else runs on the
machine; the report records the load average before and after.`,
		Example: `  outbox-lab bench --database-url postgres://postgres@127.0.0.1:5432/test
  outbox-lab bench --database-url postgres://postgres@127.0.0.1:5432/test --quick --json > bench.json
  outbox-lab bench --database-url ... --phases drain,claim --batch-size 500 --workers 4`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(a, cmd, &bf, &rf)
		},
	}
	fs := cmd.Flags()
	fs.BoolVar(&bf.quick, "quick", false, "small sizes for a run of about a minute (backlog 20,000, hot backlogs 10,000 drained for at most 5s, 200,000 history rows, 3s phases, 50 claims); explicit size flags still win")
	fs.BoolVar(&bf.json, "json", false, "print the report as JSON instead of tables")
	fs.StringVar(&bf.save, "save", "", "also write the JSON report to `file`")
	fs.StringSliceVar(&bf.phases, "phases", nil, "comma-separated `phases` to run: drain, steady, latency, hot, idle, claim, memory (default all)")
	fs.StringSliceVar(&bf.kafkaBrokers, "kafka-brokers", nil, "Kafka seed brokers, `host:port` list (default: start an embedded broker)")
	fs.StringVar(&bf.topic, "topic", bench.DefaultTopic, "`topic` to publish to; with --kafka-brokers it must exist or be auto-created")
	fs.IntVar(&bf.backlog, "backlog", bench.DefaultBacklog, "messages in the drain phase's backlog")
	fs.IntVar(&bf.relays, "relays", bench.DefaultRelays, "relays of the drain with several relays")
	fs.IntVar(&bf.writers, "writers", bench.DefaultWriters, "writer goroutines of the steady and latency phases")
	fs.IntVar(&bf.latWriters, "latency-writers", 0, "writer goroutines sharing the latency phase's schedule (default: enough to keep to --rate while commits take up to 8ms, at least --writers, at most 24)")
	fs.IntVar(&bf.rate, "rate", bench.DefaultRate, "messages per second of the latency phase")
	fs.DurationVar(&bf.duration, "duration", bench.DefaultDuration, "how long the latency phase writes; a segment of the steady phase lasts a quarter of it (8 with the relay between 9 without)")
	fs.DurationVar(&bf.idleWindow, "idle-window", bench.DefaultIdleWindow, "how long the idle phase counts queries")
	fs.IntVar(&bf.historyRows, "history-rows", bench.DefaultHistoryRows, "sent rows in the claim phase's table")
	fs.IntVar(&bf.claims, "claims", bench.DefaultClaims, "claims timed per table in the claim phase")
	fs.IntVar(&bf.aggregates, "aggregates", bench.DefaultAggregates, "aggregates the backlogs are spread over")
	fs.IntVar(&bf.payloadBytes, "payload-bytes", bench.DefaultPayloadBytes, "size of each message's JSON payload")
	fs.StringSliceVar(&bf.hotStrats, "hot-strategies", nil, "comma-separated relay `strategies` the hot phase measures: claim, cursor (default: the run's own, cursor with --cursor, else claim)")
	fs.IntVar(&bf.hotBacklog, "hot-backlog", bench.DefaultHotBacklog, "messages in each of the hot phase's backlogs")
	fs.DurationVar(&bf.hotLimit, "hot-drain-limit", bench.DefaultHotDrainLimit, "the longest the hot phase drains a skewed backlog (it stops earlier, at 2.5 times the spread backlog's drain time, at least 3s)")
	fs.StringVar(&bf.relayBinary, "relay-binary", "", "`binary` whose relay command is the relay process of the memory phase: outbox or outbox-lab (default: this binary)")
	fs.DurationVar(&bf.stallTimeout, "stall-timeout", bench.DefaultStallTimeout, "fail a phase that makes no progress for this long")
	fs.DurationVar(&bf.vacuumEvery, "vacuum-every", 0, "run VACUUM (ANALYZE) on the outbox table at this interval while writers run, as autovacuum would (default: never; use it on a server with autovacuum off)")
	fs.BoolVar(&bf.cursor, "cursor", false, "run every phase on outboxes in cursor mode (pgstore.EnableCursor): the relay leads a cursor over the outbox instead of claiming and marking each message")
	fs.StringVar(&bf.mode, "mode", string(bench.ModePolling), "`relay` serving the steady and latency phases: polling, cdc (write-ahead log, marks SENT) or cdc-delete (deletes sent rows); the CDC modes need wal_level=logical")
	fs.StringVar(&bf.cpuProfile, "cpu-profile", "", "write a CPU profile of the bench's process (relays, embedded broker, writers) to `file`, for go tool pprof")
	cli.AddRelayFlags(fs, &rf)
	// Each relay of the benchmark gets an id of its own.
	if err := fs.MarkHidden("relay-id"); err != nil {
		panic(err)
	}
	return cmd
}

// runBench builds the bench.Config from the flags, runs it and prints the
// report.
func runBench(a *cli.App, cmd *cobra.Command, bf *benchFlags, rf *cli.RelayFlags) error {
	if a.DatabaseURL() == "" {
		return cli.FlagError("database-url", "is required (or set %s): bench creates and drops schemas outbox_bench_* there and loads the server hard, so point it at a test database", cli.EnvName("database-url"))
	}
	if err := rf.Check(); err != nil {
		return err
	}
	phases, err := bench.ParsePhases(strings.Join(bf.phases, ","))
	if err != nil {
		return cli.FlagError("phases", "%v", err)
	}
	hotStrategies, err := bench.ParseStrategies(strings.Join(bf.hotStrats, ","))
	if err != nil {
		return cli.FlagError("hot-strategies", "%v", err)
	}
	// The relays' own logs: warnings and errors only, unless debugging.
	level := "warn"
	if strings.EqualFold(a.LogLevel(), "debug") {
		level = "debug"
	}
	relayLog, err := a.NewLogger(level)
	if err != nil {
		return err
	}
	cfg := bench.Config{
		DatabaseURL:   a.DatabaseURL(),
		KafkaBrokers:  bf.kafkaBrokers,
		Topic:         bf.topic,
		Phases:        phases,
		Relay:         rf.Config(relayLog),
		RelayBinary:   bf.relayBinary,
		StallTimeout:  bf.stallTimeout,
		VacuumEvery:   bf.vacuumEvery,
		Mode:          bench.Mode(bf.mode),
		Cursor:        bf.cursor,
		HotStrategies: hotStrategies,
		Progress:      a.Stderr(),
		Logger:        relayLog,
	}
	cfg.Relay.ID = ""
	fs := cmd.Flags()
	// Sizes: the flag when given, else the --quick or the full default.
	for _, s := range []struct {
		flag string
		dst  *int
		v    int
	}{
		{"backlog", &cfg.Backlog, bf.backlog},
		{"relays", &cfg.Relays, bf.relays},
		{"writers", &cfg.Writers, bf.writers},
		{"latency-writers", &cfg.LatencyWriters, bf.latWriters},
		{"rate", &cfg.Rate, bf.rate},
		{"history-rows", &cfg.HistoryRows, bf.historyRows},
		{"claims", &cfg.Claims, bf.claims},
		{"aggregates", &cfg.Aggregates, bf.aggregates},
		{"payload-bytes", &cfg.PayloadBytes, bf.payloadBytes},
		{"hot-backlog", &cfg.HotBacklog, bf.hotBacklog},
	} {
		if cli.Changed(fs, s.flag) {
			if s.v < 1 {
				return cli.FlagError(s.flag, "must be at least 1, not %d", s.v)
			}
			*s.dst = s.v
		}
	}
	for _, d := range []struct {
		flag string
		dst  *time.Duration
		v    time.Duration
	}{
		{"duration", &cfg.Duration, bf.duration},
		{"idle-window", &cfg.IdleWindow, bf.idleWindow},
		{"hot-drain-limit", &cfg.HotDrainLimit, bf.hotLimit},
	} {
		if cli.Changed(fs, d.flag) {
			if d.v <= 0 {
				return cli.FlagError(d.flag, "must be positive, not %s", d.v)
			}
			*d.dst = d.v
		}
	}
	if bf.quick {
		cfg = cfg.Quick()
	}
	if cfg.RelayBinary == "" {
		if exe, err := os.Executable(); err == nil {
			cfg.RelayBinary = exe
		}
	}
	var save *os.File
	if bf.save != "" {
		// Opened now, so that an unwritable path fails before a long run.
		if save, err = os.Create(bf.save); err != nil {
			return cli.FlagError("save", "cannot be written: %v", err)
		}
		defer save.Close()
	}
	if bf.cpuProfile != "" {
		f, err := os.Create(bf.cpuProfile)
		if err != nil {
			return cli.FlagError("cpu-profile", "cannot be written: %v", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	a.Logger().Info("bench starting", "database", cli.RedactURL(a.DatabaseURL()), "phases", phases, "quick", bf.quick)
	rep, err := bench.Run(cmd.Context(), cfg)
	if errors.Is(err, bench.ErrInvalidConfig) {
		return cli.UsageError(err)
	}
	if err != nil {
		return err
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	js = append(js, '\n')
	if save != nil {
		if _, err := save.Write(js); err != nil {
			return fmt.Errorf("save report: %w", err)
		}
		if err := save.Close(); err != nil {
			return fmt.Errorf("save report: %w", err)
		}
	}
	if bf.json {
		_, err := a.Stdout().Write(js)
		return err
	}
	if err := bench.WriteText(a.Stdout(), rep); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

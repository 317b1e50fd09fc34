package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox/broker"
)

//go:embed sql/*.sql
var sqlFiles embed.FS

// Run measures what cfg selects against the PostgreSQL server at
// cfg.DatabaseURL and the Kafka cluster at cfg.KafkaBrokers (or an embedded
// broker it starts), one phase after the other, and returns the figures
// with the goals evaluated. Each phase works in schemas of its own, which
// it drops when it ends, also when ctx is cancelled.
//
// A Config it cannot use gives an error wrapping ErrInvalidConfig. A phase
// that fails ends the run with an error naming the phase.
func Run(ctx context.Context, cfg Config) (Report, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return Report{}, err
	}
	r := &runner{cfg: cfg, prog: newProgress(cfg.Progress)}
	defer r.prog.done()
	rep := Report{StartedAt: time.Now().UTC(), Settings: settingsOf(cfg)}
	started := time.Now()
	stall0 := time.Duration(-1)
	if st, ok := cpuStall(); ok {
		stall0 = st
	}
	if err := r.setUp(ctx, &rep); err != nil {
		return Report{}, err
	}
	defer r.tearDown()

	phases := []struct {
		p   Phase
		run func(context.Context, *Report) error
	}{
		{PhaseDrain, r.runDrain},
		{PhaseSteady, r.runSteady},
		{PhaseLatency, r.runLatency},
		{PhaseHot, r.runHot},
		{PhaseIdle, r.runIdle},
		{PhaseClaim, r.runClaim},
		{PhaseMemory, r.runMemory},
	}
	for _, ph := range phases {
		if !cfg.runs(ph.p) {
			continue
		}
		r.prog.phase(string(ph.p))
		if err := ph.run(ctx, &rep); err != nil {
			return Report{}, fmt.Errorf("bench: phase %s: %w", ph.p, err)
		}
	}
	rep.Machine.LoadAverageEnd = loadAverage()
	rep.ElapsedSeconds = time.Since(started).Seconds()
	rep.Machine.CPUPressurePercent = -1
	if stall, ok := cpuStall(); ok && stall0 >= 0 && rep.ElapsedSeconds > 0 {
		rep.Machine.CPUPressurePercent = 100 * (stall - stall0).Seconds() / rep.ElapsedSeconds
	}
	rep.RelayLeastLossPercent = leastLoss(rep)
	rep.Goals = goals(rep)
	rep.Notes = append(rep.Notes, observations(rep)...)
	return rep, nil
}

// runner holds what the phases share: the configuration, the broker, and
// an administrative pool.
type runner struct {
	cfg     Config
	prog    *progress
	brokers []string
	broker  *broker.Broker
	admin   *pgxpool.Pool
}

func settingsOf(c Config) Settings {
	return Settings{
		Phases: c.Phases, Backlog: c.Backlog, Relays: c.Relays, Writers: c.Writers, Rate: c.Rate,
		DurationSeconds: c.Duration.Seconds(), IdleWindowSeconds: c.IdleWindow.Seconds(),
		HistoryRows: c.HistoryRows, Claims: c.Claims, Aggregates: c.Aggregates, PayloadBytes: c.PayloadBytes,
		BatchSize: c.Relay.BatchSize, RelayWorkers: c.Relay.Workers,
		PollIntervalMs: float64(c.Relay.PollInterval) / float64(time.Millisecond), Topic: c.Topic,
		VacuumEverySeconds: c.VacuumEvery.Seconds(),
		LingerMs:           float64(max(0, c.Relay.Linger)) / float64(time.Millisecond), Mode: c.Mode,
		LingerAbove: max(0, c.Relay.LingerAbove), Cursor: c.Cursor,
	}
}

// setUp connects to PostgreSQL, starts the embedded broker if no cluster
// was given, and describes the machine.
func (r *runner) setUp(ctx context.Context, rep *Report) error {
	r.prog.printf("connecting to PostgreSQL")
	admin, err := r.newPool(ctx, "admin", 2, nil)
	if err != nil {
		return err
	}
	r.admin = admin
	m := &rep.Machine
	m.OS, m.Arch, m.CPUs, m.GoVersion = runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version()
	m.CPUModel = cpuModel()
	m.LoadAverageStart = loadAverage()
	var maxConns string
	err = admin.QueryRow(ctx, mustSQL("server_settings.sql")).Scan(
		&m.PostgreSQL, &m.SharedBuffers, &m.SynchronousCommit, &m.Autovacuum, &maxConns)
	if err != nil {
		admin.Close()
		return fmt.Errorf("bench: read server settings: %w", err)
	}
	if len(r.cfg.KafkaBrokers) > 0 {
		r.brokers = r.cfg.KafkaBrokers
		m.Kafka = strings.Join(r.brokers, ",")
		return nil
	}
	b, err := broker.Start(broker.Config{Listen: "127.0.0.1:0", SeedTopics: []string{r.cfg.Topic}, Logger: r.cfg.Logger})
	if err != nil {
		admin.Close()
		return fmt.Errorf("bench: start embedded broker: %w", err)
	}
	r.broker, r.brokers = b, b.Addrs()
	m.Kafka = "embedded (package broker, kfake) on " + strings.Join(r.brokers, ",")
	return nil
}

func (r *runner) tearDown() {
	if r.broker != nil {
		r.broker.Close()
	}
	if r.admin != nil {
		r.admin.Close()
	}
}

// newPool opens a pool on cfg.DatabaseURL with application_name
// "outbox bench <purpose>" and at most maxConns connections. tweak, if not
// nil, adjusts the configuration first.
func (r *runner) newPool(ctx context.Context, purpose string, maxConns int32, tweak func(*pgxpool.Config)) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(r.cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("%w: DatabaseURL: %v", ErrInvalidConfig, err)
	}
	pc.ConnConfig.RuntimeParams["application_name"] = "outbox bench " + purpose
	pc.MaxConns = maxConns
	if tweak != nil {
		tweak(pc)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("bench: connect: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("bench: connect to PostgreSQL: %w", err)
	}
	return pool, nil
}

// newSchemaName returns a fresh schema name for a phase's scenario.
func newSchemaName(scenario string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "outbox_bench_" + scenario + "_" + hex.EncodeToString(b)
}

// mustSQL returns an embedded SQL file; the files are part of the binary,
// so a missing one is a bug.
func mustSQL(name string) string {
	b, err := sqlFiles.ReadFile("sql/" + name)
	if err != nil {
		panic(fmt.Sprintf("bench: embedded sql/%s: %v", name, err))
	}
	return string(b)
}

// renderSQL fills {{schema}} of an embedded SQL file with the quoted schema.
// Schema names are generated by newSchemaName, never taken from input.
func renderSQL(name, schema string) string {
	return strings.ReplaceAll(mustSQL(name), "{{schema}}", pgx.Identifier{schema}.Sanitize())
}

// loadAverage returns the 1-, 5- and 15-minute load averages, or "" where
// /proc/loadavg does not exist.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// cpuStall returns the total time during which at least one runnable task
// waited for a CPU since boot (/proc/pressure/cpu, "some ... total=" in
// microseconds), and false where the kernel does not report it.
func cpuStall() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/pressure/cpu")
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "some" {
			continue
		}
		for _, kv := range f[1:] {
			if v, ok := strings.CutPrefix(kv, "total="); ok {
				us, err := strconv.ParseInt(v, 10, 64)
				return time.Duration(us) * time.Microsecond, err == nil
			}
		}
	}
	return 0, false
}

// cpuModel returns the first "model name" of /proc/cpuinfo, or "".
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if ok && string(bytes.TrimSpace(k)) == "model name" {
			return string(bytes.TrimSpace(v))
		}
	}
	return ""
}

// cleanupCtx is for dropping schemas and stopping relays after ctx may have
// been cancelled.
func cleanupCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 2*time.Minute)
}

// errStalled is returned when a relay makes no progress for StallTimeout.
var errStalled = errors.New("no progress")

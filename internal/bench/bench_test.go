package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox/internal/pgtest"
)

// buildOutbox builds the outbox command for the memory phase.
func buildOutbox(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "outbox")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/outbox-dev/outbox/cmd/outbox")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build outbox: %v\n%s", err, out)
	}
	return bin
}

func tinyConfig() Config {
	return Config{
		DatabaseURL: pgtest.URL(),
		Backlog:     1000, Relays: 2, Writers: 2, Rate: 200, Aggregates: 200,
		Duration: time.Second, IdleWindow: time.Second,
		HistoryRows: 10_000, Claims: 10, VacuumEvery: 500 * time.Millisecond,
		HotBacklog: 300, HotDrainLimit: 2 * time.Second,
	}
}

func TestRun_TinySizes_ReportIsCompleteAndSane(t *testing.T) {
	t.Parallel()
	cfg := tinyConfig()
	cfg.RelayBinary = buildOutbox(t)
	var progress bytes.Buffer
	cfg.Progress = &progress
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}

	if rep.Machine.PostgreSQL == "" || rep.Machine.CPUs < 1 || !strings.HasPrefix(rep.Machine.Kafka, "embedded") {
		t.Errorf("machine not described: %+v", rep.Machine)
	}
	if d := rep.Drain; d == nil {
		t.Error("no drain figures")
	} else {
		if d.CeilingPerSecond <= 0 || d.RelaysCeilingPerSecond <= 0 || d.OneRelayPerSecond <= 0 || d.RelaysPerSecond <= 0 {
			t.Errorf("drain rates not positive: %+v", d)
		}
		if d.OneRelayRatio != d.OneRelayPerSecond/d.CeilingPerSecond || d.RelaysRatio != d.RelaysPerSecond/d.RelaysCeilingPerSecond {
			t.Errorf("drain ratios not the rates over the ceiling: %+v", d)
		}
		if d.Messages != 1000 || d.Relays != 2 {
			t.Errorf("drain sizes: %+v", d)
		}
		if d.CeilingCPUMicrosPerMessage <= 0 || d.CeilingCPUBusyPercent <= 0 || d.CeilingCPUBusyPercent > 100 {
			t.Errorf("ceiling CPU not measured: %v µs per message, %v%% busy", d.CeilingCPUMicrosPerMessage, d.CeilingCPUBusyPercent)
		}
	}
	if s := rep.Steady; s == nil {
		t.Error("no steady-state figures")
	} else {
		if s.WithoutRelayTxPerSecond <= 0 || s.WithRelayTxPerSecond <= 0 {
			t.Errorf("steady tx rates not positive: %+v", s)
		}
		if s.CommitToAck.Count == 0 || s.Unacked != 0 {
			t.Errorf("steady latencies: %d measured, %d unacked", s.CommitToAck.Count, s.Unacked)
		}
		// Only the measured segments' messages: not the warm-up
		// segment with the relay, nor anything written without it.
		var inSegments int64
		for _, n := range s.SegmentTransactions {
			inSegments += n
		}
		if len(s.SegmentTransactions) != s.Segments || int64(s.CommitToAck.Count) != inSegments {
			t.Errorf("steady latencies over %d messages, the %d measured segments committed %v", s.CommitToAck.Count, s.Segments, s.SegmentTransactions)
		}
		if s.WritersCPUMicrosPerTx <= 0 || s.WritersCPUBusyPercent <= 0 || s.WritersCPUBusyPercent > 101 {
			t.Errorf("writers' CPU not measured: %v µs per tx, %v%% busy", s.WritersCPUMicrosPerTx, s.WritersCPUBusyPercent)
		}
		if rep.RelayLeastLossPercent <= 0 || rep.RelayLeastLossPercent >= 100 {
			t.Errorf("least loss %v%%", rep.RelayLeastLossPercent)
		}
		checkLatency(t, "steady", s.CommitToAck)
		checkStages(t, "steady", s.Delivery)
		checkWork(t, "steady", s.Relay)
	}
	if l := rep.Latency; l == nil {
		t.Error("no fixed-rate figures")
	} else {
		if l.CommitToAck.Count != 200 || l.Unacked != 0 {
			t.Errorf("fixed rate: %d measured, %d unacked, want 200 and 0", l.CommitToAck.Count, l.Unacked)
		}
		if l.AchievedPerSecond <= 0 {
			t.Errorf("fixed rate achieved %v", l.AchievedPerSecond)
		}
		checkLatency(t, "fixed rate", l.CommitToAck)
		// The writers' own transactions: the measured ones only, not
		// the lead-in's.
		if l.Transactions.Count != l.CommitToAck.Count {
			t.Errorf("fixed rate: %d transactions timed, %d messages measured", l.Transactions.Count, l.CommitToAck.Count)
		}
		checkLatency(t, "fixed rate transactions", l.Transactions)
		checkStages(t, "fixed rate", l.Delivery)
		checkWork(t, "fixed rate", l.Relay)
	}
	if i := rep.Idle; i == nil {
		t.Error("no idle figures")
	} else if i.WindowSeconds < 1 || i.RoundTripsPerSecond != float64(i.RoundTrips)/i.WindowSeconds ||
		i.StatementsPerSecond != float64(i.Statements)/i.WindowSeconds {
		t.Errorf("idle figures inconsistent: %+v", i)
	}
	if c := rep.Claim; c == nil {
		t.Error("no claim figures")
	} else {
		for name, ct := range map[string]ClaimTimes{"empty": c.Empty, "history": c.History, "just marked": c.JustMarked, "stale statistics": c.StaleStats} {
			if ct.Claims != 10 || ct.FirstMs <= 0 || ct.P50Ms <= 0 || ct.P99Ms < ct.P50Ms || ct.MaxMs < ct.P99Ms {
				t.Errorf("claim times %s: %+v", name, ct)
			}
		}
		if c.History.HistoryRows != 10_000 || c.Empty.HistoryRows != 0 {
			t.Errorf("claim history sizes: %+v", c)
		}
		if c.StaleStats.Claimable != 1000 || c.Empty.Claimable != 10*c.BatchSize {
			t.Errorf("claimable rows: %+v", c)
		}
		if c.HistoryP99Ratio <= 0 || c.JustMarkedP99Ratio <= 0 || c.JustMarkedFirstToFirstRatio <= 0 || c.StaleStatsP99Ratio <= 0 || c.StaleStatsFirstToFirstRatio <= 0 {
			t.Errorf("claim ratios not computed: %+v", c)
		}
	}
	if m := rep.Memory; m == nil {
		t.Errorf("no memory figures; notes: %v", rep.Notes)
	} else if m.SmallPeakBytes < 1<<20 || m.LargePeakBytes < 1<<20 || m.Ratio <= 0 || m.LargeDrainPerSecond <= 0 {
		t.Errorf("memory figures: %+v", m)
	}
	if h := rep.Hot; h == nil || len(h.Strategies) != 1 || h.Strategies[0].Strategy != StrategyClaim {
		t.Errorf("hot figures, want claim mode's only: %+v", h)
	}
	if len(rep.Goals) != 14 {
		t.Errorf("%d goals evaluated, want 14: %+v", len(rep.Goals), rep.Goals)
	}

	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(normalise(back), normalise(rep)) {
		t.Errorf("JSON round trip changed the report:\n%s", b)
	}

	var text bytes.Buffer
	if err := WriteText(&text, rep); err != nil {
		t.Fatal(err)
	}
	for _, g := range rep.Goals {
		if !strings.Contains(text.String(), g.Name) {
			t.Errorf("table lacks goal %q:\n%s", g.Name, text.String())
		}
	}
	for _, want := range []string{"DRAIN", "STEADY STATE", "FIXED RATE", "HOT AGGREGATES", "IDLE", "CLAIM TIME", "RELAY MEMORY", "GOAL"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("table lacks %s:\n%s", want, text.String())
		}
	}
	if !strings.Contains(progress.String(), "phase claim") {
		t.Errorf("no progress lines:\n%s", progress.String())
	}
}

func checkLatency(t *testing.T, name string, l Latency) {
	t.Helper()
	if l.P50Ms <= 0 || l.P99Ms < l.P50Ms || l.MaxMs < l.P99Ms {
		t.Errorf("%s commit-to-ack not ordered: %+v", name, l)
	}
}

// checkStages checks that the split of commit-to-ack covers the same
// messages and that neither part is longer than the whole: per message,
// commit <= publish <= ack.
func checkStages(t *testing.T, name string, d Delivery) {
	t.Helper()
	total, toPublish, toAck := d.CommitToAck, d.CommitToPublish, d.PublishToAck
	if toPublish.Count != total.Count || toAck.Count != total.Count || d.CommitToMarked.Count != total.Count {
		t.Errorf("%s stages over %d, %d and %d messages, commit-to-ack over %d", name, toPublish.Count, toAck.Count,
			d.CommitToMarked.Count, total.Count)
	}
	const slack = 1e-6 // float rounding of the milliseconds
	if toPublish.MaxMs > total.MaxMs+slack || toAck.MaxMs > total.MaxMs+slack {
		t.Errorf("%s stage longer than commit-to-ack: to publish %+v, to ack %+v, total %+v", name, toPublish, toAck, total)
	}
	// Each message is marked after its ack, so every quantile of
	// commit-to-marked is at least that of commit-to-ack.
	m := d.CommitToMarked
	if m.P50Ms+slack < total.P50Ms || m.P99Ms+slack < total.P99Ms || m.MaxMs+slack < total.MaxMs {
		t.Errorf("%s commit-to-marked below commit-to-ack: marked %+v, ack %+v", name, m, total)
	}
}

func checkWork(t *testing.T, name string, w RelayWork) {
	t.Helper()
	if w.Claims < 1 || w.MessagesPerClaim < 1 || w.RoundTrips < 1 || w.RoundTripsPerMessage <= 0 {
		t.Errorf("%s relay work not counted: %+v", name, w)
	}
}

// normalise drops what JSON does not keep exactly (the monotonic clock).
func normalise(r Report) Report {
	r.StartedAt = r.StartedAt.Round(0)
	return r
}

// In a CDC mode the steady and latency phases are served by the CDC relay:
// every message is acknowledged, the work is counted without claims, and
// the replication slots and publications are gone afterwards.
func TestRun_CDCMode_ServesLiveWritesAndCleansUp(t *testing.T) {
	t.Parallel()
	cfg := tinyConfig()
	cfg.Phases = []Phase{PhaseSteady, PhaseLatency}
	cfg.Mode = ModeCDCDelete
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if rep.Settings.Mode != ModeCDCDelete {
		t.Errorf("settings mode %q", rep.Settings.Mode)
	}
	if s := rep.Steady; s == nil || s.CommitToAck.Count == 0 || s.Unacked != 0 || s.Relay.Claims != 0 || s.Relay.RoundTrips < 1 {
		t.Errorf("steady with the CDC relay: %+v", s)
	}
	if l := rep.Latency; l == nil || l.CommitToAck.Count != 200 || l.Unacked != 0 {
		t.Errorf("fixed rate with the CDC relay: %+v", l)
	}
	conn, err := pgx.Connect(ctx, pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var slots, pubs int
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'outbox_outbox_bench_%'),
		(SELECT count(*) FROM pg_publication WHERE pubname LIKE 'outbox_outbox_bench_%')`).Scan(&slots, &pubs); err != nil {
		t.Fatal(err)
	}
	if slots != 0 || pubs != 0 {
		t.Errorf("%d replication slots and %d publications of the bench left behind", slots, pubs)
	}
}

func TestRun_PhaseFilter_RunsOnlyThosePhases(t *testing.T) {
	t.Parallel()
	cfg := tinyConfig()
	cfg.Phases = []Phase{PhaseIdle}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if rep.Idle == nil || rep.Drain != nil || rep.Steady != nil || rep.Latency != nil || rep.Hot != nil || rep.Claim != nil || rep.Memory != nil {
		t.Errorf("phases run for filter [idle]: %+v", rep)
	}
	if len(rep.Goals) != 1 || !strings.HasPrefix(rep.Goals[0].Name, "idle") {
		t.Errorf("goals: %+v", rep.Goals)
	}
}

func TestRun_MemoryWithoutBinary_IsSkippedWithANote(t *testing.T) {
	t.Parallel()
	cfg := tinyConfig()
	cfg.Phases = []Phase{PhaseMemory}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if rep.Memory != nil || !slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.Contains(n, "RelayBinary") }) {
		t.Errorf("memory %+v, notes %q", rep.Memory, rep.Notes)
	}
}

func TestRun_UnreachableDatabase_FailsFast(t *testing.T) {
	t.Parallel()
	cfg := tinyConfig()
	cfg.DatabaseURL = "postgres://nobody@127.0.0.1:1/none?connect_timeout=2"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := Run(ctx, cfg); err == nil || !strings.Contains(err.Error(), "connect") {
		t.Fatalf("Run against nothing: %v", err)
	}
}

func TestConfig_BadFieldIsNamed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		change func(*Config)
		field  string
	}{
		{func(c *Config) { c.DatabaseURL = "" }, "DatabaseURL"},
		{func(c *Config) { c.Backlog = -1 }, "Backlog"},
		{func(c *Config) { c.Relays = -1 }, "Relays"},
		{func(c *Config) { c.Writers = -2 }, "Writers"},
		{func(c *Config) { c.LatencyWriters = -1 }, "LatencyWriters"},
		{func(c *Config) { c.Rate = -5 }, "Rate"},
		{func(c *Config) { c.Duration = time.Millisecond }, "Duration"},
		{func(c *Config) { c.IdleWindow = time.Millisecond }, "IdleWindow"},
		{func(c *Config) { c.HistoryRows = -1 }, "HistoryRows"},
		{func(c *Config) { c.Claims = 1 }, "Claims"},
		{func(c *Config) { c.Aggregates = -1 }, "Aggregates"},
		{func(c *Config) { c.PayloadBytes = 10 }, "PayloadBytes"},
		{func(c *Config) { c.StallTimeout = time.Millisecond }, "StallTimeout"},
		{func(c *Config) { c.VacuumEvery = -time.Second }, "VacuumEvery"},
		{func(c *Config) { c.Relay.BatchSize = -1 }, "Relay.BatchSize"},
		{func(c *Config) { c.KafkaBrokers = []string{""} }, "KafkaBrokers[0]"},
		{func(c *Config) { c.Phases = []Phase{"warp"} }, "Phases"},
		{func(c *Config) { c.Mode = "smoke-signals" }, "Mode"},
		{func(c *Config) { c.HotBacklog = -1 }, "HotBacklog"},
		{func(c *Config) { c.HotDrainLimit = time.Millisecond }, "HotDrainLimit"},
		{func(c *Config) { c.HotStrategies = []Strategy{StrategyClaim, "cdc"} }, "HotStrategies[1]"},
	}
	for _, tt := range tests {
		cfg := Config{DatabaseURL: "postgres://x@127.0.0.1:1/x"}
		tt.change(&cfg)
		_, err := Run(context.Background(), cfg)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("%s: got %v, want ErrInvalidConfig naming it", tt.field, err)
		}
	}
}

func TestParsePhases_AcceptsKnownNamesOnly(t *testing.T) {
	t.Parallel()
	got, err := ParsePhases(" drain, idle,drain ")
	if err != nil || !reflect.DeepEqual(got, []Phase{PhaseDrain, PhaseIdle}) {
		t.Errorf("ParsePhases: %v, %v", got, err)
	}
	if got, err := ParsePhases(""); err != nil || got != nil {
		t.Errorf("empty list: %v, %v", got, err)
	}
	if _, err := ParsePhases("drain,nap"); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), `"nap"`) {
		t.Errorf("unknown phase: %v", err)
	}
}

func TestQuantile_IsNearestRank(t *testing.T) {
	t.Parallel()
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for q, want := range map[float64]time.Duration{0.5: 50 * time.Millisecond, 0.99: 99 * time.Millisecond, 1: 100 * time.Millisecond} {
		if got := quantile(ds, q); got != want {
			t.Errorf("quantile(%v) = %v, want %v", q, got, want)
		}
	}
	if got := quantile(nil, 0.5); got != 0 {
		t.Errorf("quantile of nothing = %v", got)
	}
}

func TestSlope_OfALine_IsItsGradient(t *testing.T) {
	t.Parallel()
	var ss []sample
	for i := range 10 {
		ss = append(ss, sample{time.Duration(i) * 250 * time.Millisecond, 100 + 40*float64(i)*0.25})
	}
	if got := slope(ss); got < 39.999 || got > 40.001 {
		t.Errorf("slope = %v, want 40", got)
	}
	if got := slope(ss[:1]); got != 0 {
		t.Errorf("slope of one sample = %v", got)
	}
}

// A backlog that stays level except for one peak at the end does not
// grow; one that rises by 30 messages/s under noise of +-20 does. (A
// least-squares line gives the first 35 messages/s.)
func TestSlope_OnePeakIsNotATrend(t *testing.T) {
	t.Parallel()
	level := []float64{30, 25, 35, 28, 32, 27, 33, 30, 160}
	var flat, rising []sample
	for i, v := range level {
		at := time.Duration(i) * 250 * time.Millisecond
		flat = append(flat, sample{at, v})
		noise := float64((i*7)%5-2) * 10
		rising = append(rising, sample{at, 30 + 30*at.Seconds() + noise})
	}
	if got := slope(flat); got < -5 || got > 5 {
		t.Errorf("slope of a level backlog with one peak = %v msg/s, want about 0", got)
	}
	if got := slope(rising); got < 20 || got > 40 {
		t.Errorf("slope of a backlog rising 30 msg/s = %v, want about 30", got)
	}
}

func TestHuman_GroupsThousands(t *testing.T) {
	t.Parallel()
	for v, want := range map[float64]string{1234567: "1,234,567", 950: "950", -4200: "-4,200", 3.14159: "3.14", 0.25: "0.250", 42: "42.0"} {
		if got := human(v); got != want {
			t.Errorf("human(%v) = %q, want %q", v, got, want)
		}
	}
	for n, want := range map[int64]string{26: "26", 0: "0", -42: "-42", 100: "100", 12_345: "12,345"} {
		if got := humanCount(n); got != want {
			t.Errorf("humanCount(%d) = %q, want %q", n, got, want)
		}
	}
}

// In cursor mode (--cursor) the drain's loops, the relays and the claim
// phase run on a Cursor of the store, as relays do: the backlogs drain,
// every claim finds its batch, and the live writes are acknowledged.
func TestRun_CursorMode_DrainsClaimsAndServes(t *testing.T) {
	t.Parallel()
	cfg := tinyConfig()
	cfg.Phases = []Phase{PhaseDrain, PhaseClaim, PhaseSteady}
	cfg.Cursor = true
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if d := rep.Drain; d == nil || d.CeilingPerSecond <= 0 || d.OneRelayPerSecond <= 0 || d.RelaysPerSecond <= 0 {
		t.Errorf("drain in cursor mode: %+v", d)
	}
	if c := rep.Claim; c == nil || c.Empty.P99Ms <= 0 || c.History.P99Ms <= 0 {
		t.Errorf("claims in cursor mode: %+v", c)
	}
	if s := rep.Steady; s == nil || s.CommitToAck.Count == 0 || s.Unacked != 0 {
		t.Errorf("steady in cursor mode: %+v", s)
	}
}

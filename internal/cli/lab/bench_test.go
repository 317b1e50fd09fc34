package lab

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/outbox-dev/outbox/internal/bench"
	"github.com/outbox-dev/outbox/internal/pgtest"
)

func TestBench_WithoutDatabaseURL_IsAUsageErrorNamingTheFlag(t *testing.T) {
	t.Parallel()
	res := runCLI(t, nil, "bench", "--quick")
	if res.code != exitUsage || !strings.Contains(res.stderr, "--database-url is required") || !strings.Contains(res.stderr, "OUTBOX_DATABASE_URL") {
		t.Fatalf("exit %d, stderr:\n%s", res.code, res.stderr)
	}
}

func TestBench_BadFlagsFailNamingTheFlag(t *testing.T) {
	t.Parallel()
	db := "postgres://app@127.0.0.1:1/app" // nothing listens: every case must fail before connecting
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--phases", "drain,nap"}, `--phases`},
		{[]string{"--backlog", "0"}, "--backlog must be at least 1"},
		{[]string{"--writers", "-3"}, "--writers must be at least 1"},
		{[]string{"--latency-writers", "0"}, "--latency-writers must be at least 1"},
		{[]string{"--duration", "0s"}, "--duration must be positive"},
		{[]string{"--batch-size", "0"}, "--batch-size must be at least 1"},
		{[]string{"--max-run", "101"}, "--max-run must be at least 1 and at most --batch-size (100)"},
		{[]string{"--hot-strategies", "claim,cdc"}, "--hot-strategies"},
		{[]string{"--hot-backlog", "0"}, "--hot-backlog must be at least 1"},
		{[]string{"--hot-drain-limit", "0s"}, "--hot-drain-limit must be positive"},
	}
	for _, tt := range tests {
		args := append([]string{"bench", "--database-url", db}, tt.args...)
		res := runCLI(t, nil, args...)
		if res.code != exitUsage || !strings.Contains(res.stderr, tt.want) {
			t.Errorf("bench %v: exit %d, want %d with %q; stderr:\n%s", tt.args, res.code, exitUsage, tt.want, res.stderr)
		}
	}
}

func TestBenchHelp_ListsThePhases(t *testing.T) {
	t.Parallel()
	res := runCLI(t, nil, "bench", "--help")
	if res.code != exitOK {
		t.Fatalf("bench --help: exit %d, stderr:\n%s", res.code, res.stderr)
	}
	for _, p := range bench.AllPhases {
		if !strings.Contains(res.stdout, string(p)) {
			t.Errorf("bench --help does not mention phase %s", p)
		}
	}
	for _, want := range []string{"--quick", "--json", "OUTBOX_DATABASE_URL", "outbox_bench_"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("bench --help does not mention %s", want)
		}
	}
}

func TestBench_JSON_IsTheReportOfTheChosenPhases(t *testing.T) {
	t.Parallel()
	env := map[string]string{"OUTBOX_DATABASE_URL": pgtest.URL()}
	res := runCLI(t, env, "bench", "--phases", "idle", "--idle-window", "1s", "--json")
	if res.code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", res.code, res.stderr)
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
		t.Fatalf("stdout is not a JSON report: %v\n%s", err, res.stdout)
	}
	if rep.Idle == nil || rep.Drain != nil || rep.Settings.IdleWindowSeconds != 1 || len(rep.Goals) != 1 {
		t.Errorf("report: %s", res.stdout)
	}
	if !strings.Contains(res.stderr, "phase idle") {
		t.Errorf("no progress on stderr:\n%s", res.stderr)
	}
}

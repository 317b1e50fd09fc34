package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// The fixture's table is small: its SENT messages are counted, not
// estimated.
func TestStats_PrintsCountsBlockedAggregatesAndFailingTypes(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.seed(t)
	out := f.mustRun(t, exitOK, "stats").stdout
	for _, want := range []string{
		"PENDING      1", "SENT         4\n", "FAILED       1", "DEAD_LETTER  2", "DISCARDED    0",
		"Sent last minute:   1", "Blocked aggregates: 1",
		"Order/42           " + seedDeadID + "  OrderPlaced  1",
		"OrderPaid           1       0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stats output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "Oldest unsent:      1h0m") {
		t.Errorf("stats output does not show the hour-old unsent message:\n%s", out)
	}
}

func TestStats_JSONForScripts(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.seed(t)
	out := f.mustRun(t, exitOK, "stats", "--json", "--exact").stdout
	var got statsOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("stats --json is not JSON: %v\n%s", err, out)
	}
	want := map[string]int64{"PENDING": 1, "IN_FLIGHT": 0, "SENT": 4, "FAILED": 1, "DEAD_LETTER": 2, "DISCARDED": 0}
	for k, v := range want {
		if got.Counts[k] != v {
			t.Errorf("counts[%s] = %d, want %d (all: %v)", k, got.Counts[k], v, got.Counts)
		}
	}
	if got.SentEstimated || got.BlockedAggregates != 1 || got.Blocked[0].DeadLetterID != seedDeadID ||
		got.OldestUnsentAgeSeconds < 3600 || got.SentLastMinute != 1 || len(got.TopFailing) != 3 {
		t.Errorf("stats --json = %+v", got)
	}
}

func TestStats_BadTopIsAUsageError(t *testing.T) {
	t.Parallel()
	res := runCLI(t, nil, "stats", "--top", "0")
	if res.code != exitUsage || !strings.Contains(res.stderr, "--top must be at least 1") {
		t.Errorf("exit %d, stderr:\n%s", res.code, res.stderr)
	}
}

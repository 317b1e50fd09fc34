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

// The topics the running relays reported show in stats, the one that
// cannot take records first with its reason and fix, in text and JSON.
func TestStats_ShowsReportedTopics(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.exec(t, `INSERT INTO {{schema}}.outbox_topics (relay_id, topic, published_last_hour, last_published_at, unavailable_since, reason, fix)
		VALUES ('r1', 'orders', 12, now() - interval '5 seconds', NULL, '', ''),
		       ('r1', 'ordrs', 0, NULL, now() - interval '1 minute', 'UNKNOWN_TOPIC_OR_PARTITION', 'create the topic')`)
	out := f.mustRun(t, exitOK, "stats").stdout
	for _, want := range []string{
		"ordrs   0                    never           CANNOT TAKE RECORDS since 1m0s ago: UNKNOWN_TOPIC_OR_PARTITION; its messages wait (create the topic)",
		"orders  12                   5s ago          ok",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stats output lacks %q:\n%s", want, out)
		}
	}
	var got statsOutput
	if err := json.Unmarshal([]byte(f.mustRun(t, exitOK, "stats", "--json").stdout), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Topics) != 2 || got.Topics[0].Topic != "ordrs" || !got.Topics[0].Unavailable || got.Topics[0].Reason != "UNKNOWN_TOPIC_OR_PARTITION" ||
		got.Topics[1].PublishedLastHour != 12 || got.Topics[1].Unavailable {
		t.Errorf("stats --json topics = %+v", got.Topics)
	}
}

package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// migrate --partitioned, then cleanup --partitions drops the partition of
// the old SENT messages and keeps one holding a dead letter, naming why.
func TestCleanupPartitions_DropsOldPartitionsKeepsDeadLetters(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	out := f.mustRun(t, exitOK, "migrate", "--partitioned", "--partition-interval", "1d").stdout
	if !strings.Contains(out, "partitioned by 1d") || !strings.Contains(out, "outbox_messages_default") {
		t.Errorf("migrate --partitioned output:\n%s", out)
	}
	f.seed(t) // three SENT messages 10 days old land in the default partition
	tenDays := time.Now().UTC().Add(-240 * time.Hour).Format("20060102")
	out = f.mustRun(t, exitOK, "cleanup", "--partitions", "--older-than", "7d").stdout
	if !strings.Contains(out, "created partition outbox_messages_p"+tenDays) ||
		!strings.Contains(out, "dropped partition outbox_messages_p"+tenDays) {
		t.Errorf("cleanup --partitions output:\n%s", out)
	}
	if n := f.queryInt(t, "SELECT count(*) FROM {{schema}}.outbox_messages"); n != 5 {
		t.Errorf("%d messages left, want 5 (the recent SENT and the four unsent)", n)
	}

	f.exec(t, `INSERT INTO {{schema}}.outbox_messages
		(id, aggregate_type, aggregate_id, event_type, event_version, payload, content_type, status, created_at, published_at)
		VALUES (gen_random_uuid(), 'Old', '1', 'E', 1, '{}', 'application/json', 'DEAD_LETTER', now() - interval '9 days', NULL),
		       (gen_random_uuid(), 'Old', '2', 'E', 1, '{}', 'application/json', 'SENT', now() - interval '9 days', now() - interval '9 days')`)
	out = f.mustRun(t, exitOK, "cleanup", "--partitions", "--older-than", "7d", "--json").stdout
	var got partitionsJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("cleanup --partitions --json: %v:\n%s", err, out)
	}
	nineDays := "outbox_messages_p" + time.Now().UTC().Add(-216*time.Hour).Format("20060102")
	if len(got.Dropped) != 0 || len(got.Kept) != 1 || got.Kept[0].Name != nineDays || got.Kept[0].DeadLetters != 1 ||
		!strings.Contains(got.Kept[0].Reason, "dead letter") {
		t.Errorf("cleanup --partitions --json = %+v, want %s kept for its dead letter", got, nineDays)
	}
	if n := f.queryInt(t, "SELECT count(*) FROM {{schema}}.outbox_messages WHERE aggregate_type = 'Old'"); n != 2 {
		t.Errorf("%d messages of the kept partition left, want 2", n)
	}
}

func TestCleanupPartitions_PlainTableAndBadFlags(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	res := f.run(t, "cleanup", "--partitions", "--older-than", "7d")
	if res.code == exitOK || !strings.Contains(res.stderr, "outbox migrate --partitioned") {
		t.Errorf("cleanup --partitions on a plain table: exit %d, stderr:\n%s", res.code, res.stderr)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cleanup", "--older-than", "7d", "--partitions-ahead", "2"}, "--partitions is required"},
		{[]string{"migrate", "--partition-interval", "1d"}, "--partitioned is required"},
		{[]string{"migrate", "--partitioned", "--partition-interval", "90m"}, "--partition-interval must be a whole number of hours"},
	} {
		res := runCLI(t, f.env, tc.args...)
		if res.code != exitUsage || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr:\n%s\nwant exit %d and %q", tc.args, res.code, res.stderr, exitUsage, tc.want)
		}
	}
}

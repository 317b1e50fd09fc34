package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCleanup_DeletesOldSentOnly(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.seed(t)
	out := f.mustRun(t, exitOK, "cleanup", "--older-than", "7d", "--batch-size", "2").stdout
	if !strings.Contains(out, "deleted 3 SENT message(s)") || !strings.Contains(out, "in 2 batch(es)") {
		t.Errorf("cleanup output:\n%s", out)
	}
	if n := f.queryInt(t, "SELECT count(*) FROM {{schema}}.outbox_messages"); n != 5 {
		t.Errorf("%d messages left, want 5 (the recent SENT and the four unsent)", n)
	}
	out = f.mustRun(t, exitOK, "cleanup", "--older-than", "1d12h", "--json").stdout
	var got cleanupJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.Sent != 0 || got.Cutoff.IsZero() {
		t.Errorf("cleanup --json = %+v, %v:\n%s", got, err, out)
	}
}

func TestCleanup_IncludeDiscarded(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.seed(t)
	f.mustRun(t, exitOK, "dlq", "discard", seedDead2ID, "--reason", "r")
	f.exec(t, "UPDATE {{schema}}.outbox_messages SET discarded_at = now() - interval '8 days' WHERE id = $1", seedDead2ID)
	out := f.mustRun(t, exitOK, "cleanup", "--older-than", "7d", "--include-discarded").stdout
	if !strings.Contains(out, "deleted 3 SENT and 1 DISCARDED message(s)") {
		t.Errorf("cleanup --include-discarded output:\n%s", out)
	}
}

func TestCleanup_BadFlagsAreUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cleanup"}, "--older-than is required"},
		{[]string{"cleanup", "--older-than", "7x"}, `"7x" is not a duration`},
		{[]string{"cleanup", "--older-than", "30s"}, "--older-than must be at least 1m0s"},
		{[]string{"cleanup", "--older-than", "7d", "--batch-size", "0"}, "--batch-size must be at least 1"},
	} {
		res := runCLI(t, nil, tc.args...)
		if res.code != exitUsage || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr:\n%s\nwant exit %d and %q", tc.args, res.code, res.stderr, exitUsage, tc.want)
		}
	}
}

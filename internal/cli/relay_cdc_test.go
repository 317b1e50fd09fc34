package cli

import (
	"strings"
	"testing"
)

// The relay's CDC settings are checked before anything connects, and an
// error names the flag.
func TestRelayCDC_BadSettingFailsNamingTheFlag(t *testing.T) {
	t.Parallel()
	db := "postgres://app@127.0.0.1:1/app" // nothing listens on port 1
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--mode", "wal"}, "--mode must be claim, cursor or cdc"},
		{[]string{"--mode", "claim", "--slot", "s"}, "--slot applies only to --mode cdc"},
		{[]string{"--mode", "polling", "--recreate-slot"}, "--recreate-slot applies only to --mode cdc"},
		{[]string{"--cdc-cleanup", "truncate"}, "--cdc-cleanup must be mark-sent or delete"},
		{[]string{"--mode", "cdc", "--slot", "Bad-Slot"}, "--slot is not usable"},
		{[]string{"--mode", "cdc", "--publication", "a'b"}, "--publication is not usable"},
		{[]string{"--mode", "cdc", "--cdc-cleanup", "truncate"}, "--cdc-cleanup must be mark-sent or delete"},
		{[]string{"--mode", "cdc", "--batch-size", "0"}, "--batch-size must be at least 1"},
		{[]string{"--mode", "cursor", "--cdc-max-in-flight", "10"}, "--cdc-max-in-flight applies only to --mode cdc"},
		{[]string{"--mode", "cdc", "--cdc-max-in-flight", "-1"}, "--cdc-max-in-flight must be 0"},
		{[]string{"--mode", "cdc", "--cdc-max-in-flight-bytes", "0"}, "--cdc-max-in-flight-bytes must be at least 1"},
	} {
		res := runCLI(t, nil, append([]string{"relay", "--database-url", db}, tc.args...)...)
		if res.code != exitUsage || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("relay %v: exit %d, stderr %q; want exit %d and %q", tc.args, res.code, res.stderr, exitUsage, tc.want)
		}
	}
}

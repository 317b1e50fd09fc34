package lab

import (
	"strings"
	"testing"
)

// A bad chaos flag is a usage error (exit status 2) that names the flag and
// the rule, before anything is built or started.
func TestChaos_BadFlag_UsageErrorNamingTheFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"chaos", "--relays", "1"}, "--relays"},
		{[]string{"chaos", "--duration", "1s"}, "--duration"},
		{[]string{"chaos", "--lease", "10ms"}, "--lease"},
		{[]string{"chaos", "--rate", "-1"}, "--rate"},
		{[]string{"chaos", "--database-url", "host=db user=app"}, "--database-url"},
		{[]string{"chaos", "--strategy", "polling"}, "--strategy"},
		{[]string{"chaos", "--cursor", "--strategy", "cdc"}, "--cursor"},
		{[]string{"chaos", "--sample-every", "10ms"}, "--sample-every"},
	} {
		res := runCLI(t, nil, c.args...)
		if res.code != exitUsage || !strings.Contains(res.stderr, c.want) {
			t.Errorf("outbox-lab %s: exit %d, stderr %q; want %d naming %s", strings.Join(c.args, " "), res.code, res.stderr, exitUsage, c.want)
		}
	}
}

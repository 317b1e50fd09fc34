package cli

import (
	"strings"
	"testing"
)

// outbox has none of the lab's commands; naming one is a usage error that
// says where it is.
func TestLabCommand_IsAUsageErrorPointingAtOutboxLab(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"demo", "example", "bench", "chaos"} {
		res := runCLI(t, nil, name, "--help")
		if res.code != exitUsage || !strings.Contains(res.stderr, "go run ./cmd/outbox-lab "+name) {
			t.Errorf("outbox %s: exit %d, stderr %q; want %d pointing at outbox-lab", name, res.code, res.stderr, exitUsage)
		}
	}
	if res := runCLI(t, nil, "teleport"); res.code != exitUsage || strings.Contains(res.stderr, "outbox-lab") {
		t.Errorf("outbox teleport: exit %d, stderr %q; want %d without a pointer at outbox-lab", res.code, res.stderr, exitUsage)
	}
}

package cli

import (
	"strings"
	"testing"
	"time"
)

// The demo runs below are not parallel: each is a whole system.

// 'outbox demo' runs the system, prints the summary with every check
// passed, and exits 0.
func TestDemo_RunsAndExitsZeroWhenEveryCheckPasses(t *testing.T) {
	r := runCLI(t, nil, "demo", "--duration", "4s", "--rate", "10", "--data-dir", t.TempDir())
	if r.code != exitOK {
		t.Fatalf("exit %d; want 0\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if n := strings.Count(r.stdout, "  PASS  "); n != 5 || strings.Contains(r.stdout, "FAIL") {
		t.Errorf("want 5 passed checks and no failure:\n%s", r.stdout)
	}
}

// Ctrl-C ends the load early; the backlog still drains and the checks run.
func TestDemo_InterruptStopsTheLoadAndStillChecks(t *testing.T) {
	stdout, stderr, stop, done := startCLI(nil, "demo", "--duration", "10m", "--rate", "10", "--data-dir", t.TempDir())
	defer stop()
	stdout.waitFor(t, "invoices", 60*time.Second, done) // the first progress line
	stop()
	if code := exitCode(t, done, stderr); code != exitOK {
		t.Fatalf("exit %d after interrupt; want 0\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "PASS  nothing lost") {
		t.Errorf("no summary after interrupt:\n%s", stdout.String())
	}
}

// When the events cannot be delivered (here: no broker at the address
// given), the checks fail and the exit status is 1.
func TestDemo_ExitsOneWhenAnInvariantFails(t *testing.T) {
	r := runCLI(t, nil, "demo", "--duration", "1s", "--rate", "10", "--drain-timeout", "2s", "--kafka-brokers", "127.0.0.1:1",
		"--data-dir", t.TempDir())
	if r.code != exitError {
		t.Fatalf("exit %d; want 1\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "FAIL  nothing lost") || !strings.Contains(r.stderr, "invariant violated") {
		t.Errorf("want the failed check in the summary and the error:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
}

func TestDemo_BadFlagIsAUsageError(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--rate", "0"}, {"--duration", "0s"}, {"--schema-prefix", "Bad"}, {"--db", "postgres://u:secret@[::1"}} {
		r := runCLI(t, nil, append([]string{"demo"}, args...)...)
		if r.code != exitUsage {
			t.Errorf("%v: exit %d; want 2\n%s", args, r.code, r.stderr)
		}
		if strings.Contains(r.stderr, "secret") {
			t.Errorf("%v: the error repeats the password: %s", args, r.stderr)
		}
	}
}

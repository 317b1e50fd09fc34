package lab

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outbox-dev/outbox/internal/cli"
)

// The exit statuses of Main.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// syncBuffer is a bytes.Buffer safe for a command writing while the test
// reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor polls b until it contains s, or fails the test after timeout.
func (b *syncBuffer) waitFor(t testing.TB, s string, timeout time.Duration, done <-chan int) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(b.String(), s) {
		select {
		case code := <-done:
			t.Fatalf("command exited with %d before printing %q; output:\n%s", code, s, b.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q within %s; output:\n%s", s, timeout, b.String())
		}
	}
}

// run runs the outbox-lab command line with env as its whole environment,
// so that tests need not touch the process environment and can run in
// parallel.
func run(ctx context.Context, env map[string]string, args []string, stdout, stderr *syncBuffer) int {
	lookup := func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
	return program(cli.LookupEnv(lookup)).Main(ctx, args, stdout, stderr)
}

type cliResult struct {
	code           int
	stdout, stderr string
}

// runCLI runs the command line in-process with env as its environment.
func runCLI(t testing.TB, env map[string]string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr syncBuffer
	code := run(ctx, env, args, &stdout, &stderr)
	return cliResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// startCLI runs the command line in the background until the returned
// cancel is called; the exit code arrives on the channel.
func startCLI(env map[string]string, args ...string) (stdout, stderr *syncBuffer, cancel context.CancelFunc, done <-chan int) {
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr = &syncBuffer{}, &syncBuffer{}
	ch := make(chan int, 1)
	go func() { ch <- run(ctx, env, args, stdout, stderr) }()
	return stdout, stderr, cancel, ch
}

// exitCode waits for a background command to exit.
func exitCode(t testing.TB, done <-chan int, stderr *syncBuffer) int {
	t.Helper()
	select {
	case code := <-done:
		return code
	case <-time.After(60 * time.Second):
		t.Fatalf("command did not exit within 60s after cancel; stderr:\n%s", stderr.String())
		return -1
	}
}

package lab

import (
	"context"
	"io"
	"testing"

	"github.com/outbox-dev/outbox/internal/cli"
	"github.com/outbox-dev/outbox/internal/cli/clitest"
)

// The exit statuses of Main.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// syncBuffer is a buffer safe for a command writing while the test reads.
type syncBuffer = clitest.Buffer

// run runs the outbox-lab command line with env as its whole environment,
// so that tests need not touch the process environment and can run in
// parallel.
func run(ctx context.Context, env map[string]string, args []string, stdout, stderr io.Writer) int {
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

// withEnv is the outbox-lab command line with env as its whole environment.
func withEnv(env map[string]string) clitest.Main {
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
		return run(ctx, env, args, stdout, stderr)
	}
}

// runCLI runs the command line in-process with env as its environment.
func runCLI(t testing.TB, env map[string]string, args ...string) cliResult {
	t.Helper()
	r := clitest.Run(t, withEnv(env), args...)
	return cliResult{code: r.Code, stdout: r.Stdout, stderr: r.Stderr}
}

// startCLI runs the command line in the background until the returned
// cancel is called; the exit code arrives on the channel.
func startCLI(env map[string]string, args ...string) (stdout, stderr *syncBuffer, cancel context.CancelFunc, done <-chan int) {
	return clitest.Start(withEnv(env), args...)
}

// exitCode waits for a background command to exit.
func exitCode(t testing.TB, done <-chan int, stderr *syncBuffer) int {
	t.Helper()
	return clitest.ExitCode(t, done, stderr)
}

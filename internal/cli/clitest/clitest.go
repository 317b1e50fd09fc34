// Package clitest runs a command line in-process for tests, in the
// foreground or in the background, with output buffers that are safe to
// read while the command writes.
//
//	res := clitest.Run(t, main, "migrate", "--schema", "s1")
//	if res.Code != 0 { t.Fatal(res.Stderr) }
package clitest

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// Main is a command line's entry point, as cli.Main: it runs args and
// returns the exit status.
type Main func(ctx context.Context, args []string, stdout, stderr io.Writer) int

// Result is what a command run in the foreground did.
type Result struct {
	Code           int
	Stdout, Stderr string
}

// Timeout bounds a command run by Run, and the wait of ExitCode.
const Timeout = 60 * time.Second

// Run runs args with main and returns what it did, within Timeout.
func Run(t testing.TB, main Main, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	var stdout, stderr Buffer
	code := main(ctx, args, &stdout, &stderr)
	return Result{Code: code, Stdout: stdout.String(), Stderr: stderr.String()}
}

// Start runs args with main in the background until cancel is called; the
// exit status arrives on done.
func Start(main Main, args ...string) (stdout, stderr *Buffer, cancel context.CancelFunc, done <-chan int) {
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr = &Buffer{}, &Buffer{}
	ch := make(chan int, 1)
	go func() { ch <- main(ctx, args, stdout, stderr) }()
	return stdout, stderr, cancel, ch
}

// ExitCode waits up to Timeout for a command started by Start to exit.
func ExitCode(t testing.TB, done <-chan int, stderr *Buffer) int {
	t.Helper()
	select {
	case code := <-done:
		return code
	case <-time.After(Timeout):
		t.Fatalf("command did not exit within %s after cancel; stderr:\n%s", Timeout, stderr.String())
		return -1
	}
}

// Buffer is a bytes.Buffer safe for a command writing while the test
// reads.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// WaitFor polls b until it contains s, or fails the test after timeout or
// when the command exits first (its status arriving on done).
func (b *Buffer) WaitFor(t testing.TB, s string, timeout time.Duration, done <-chan int) {
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

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox/broker"
)

// binary is the outbox-lab command (every outbox command and the example
// services) built with failpoints, shared by all tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "outbox-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "outbox-lab")
	// Many relays run at once here: each takes a free port for its admin
	// endpoint instead of the default 9464.
	os.Setenv("OUTBOX_METRICS_ADDR", "127.0.0.1:0")
	build := exec.Command("go", "build", "-tags", "failpoints", "-o", binary, "github.com/outbox-dev/outbox/cmd/outbox-lab")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build outbox-lab:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running outbox process.
type proc struct {
	t      testing.TB
	cmd    *exec.Cmd
	mu     sync.Mutex
	lines  []string
	newOut chan struct{}
	exited chan struct{}
	err    error
}

// start runs the outbox binary with args and extra environment variables.
func start(t testing.TB, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	p := &proc{t: t, cmd: cmd, newOut: make(chan struct{}, 1), exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start outbox %v: %v", args, err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
			select {
			case p.newOut <- struct{}{}:
			default:
			}
		}
	}()
	go func() {
		p.err = cmd.Wait()
		pw.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("output of outbox %v:\n%s", args, p.output())
		}
	})
	return p
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// waitFor waits until a line of output contains s.
func (p *proc) waitFor(s string, within time.Duration) {
	p.t.Helper()
	deadline := time.After(within)
	for {
		if strings.Contains(p.output(), s) {
			return
		}
		select {
		case <-p.newOut:
		case <-time.After(50 * time.Millisecond):
		case <-p.exited:
			if strings.Contains(p.output(), s) {
				return
			}
			p.t.Fatalf("process exited (%v) before printing %q:\n%s", p.err, s, p.output())
		case <-deadline:
			p.t.Fatalf("no %q within %s:\n%s", s, within, p.output())
		}
	}
}

// kill sends SIGKILL and waits for the process to die.
func (p *proc) kill() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		p.t.Fatalf("kill: %v", err)
	}
	<-p.exited
}

// stop sends SIGTERM and returns the exit code.
func (p *proc) stop(within time.Duration) int {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatalf("sigterm: %v", err)
	}
	select {
	case <-p.exited:
	case <-time.After(within):
		p.t.Fatalf("process did not exit within %s of SIGTERM:\n%s", within, p.output())
	}
	return p.cmd.ProcessState.ExitCode()
}

// startBroker runs the embedded broker for the test.
func startBroker(t testing.TB) *broker.Broker {
	t.Helper()
	b, err := broker.Start(broker.Config{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// consumed reads every record of topic from the start until records with
// want distinct eventIds were read or within passed, and returns them all,
// duplicates included.
func consumed(t testing.TB, addrs []string, topic string, want int, within time.Duration) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var recs []*kgo.Record
	distinct := map[string]bool{}
	for len(distinct) < want && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			recs = append(recs, r)
			distinct[header(r, "eventId")] = true
		})
	}
	return recs
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func quietLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.DiscardHandler)
}

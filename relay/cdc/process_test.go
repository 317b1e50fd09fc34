package cdc_test

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/relay/cdc"
)

var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

// outboxBinary builds cmd/outbox once per test run.
func outboxBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "outbox-cdc-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "outbox")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/outbox-dev/outbox/cmd/outbox").CombinedOutput()
		if err != nil {
			buildErr = err
			binPath = string(out)
		}
	})
	if buildErr != nil {
		t.Fatalf("build outbox: %v\n%s", buildErr, binPath)
	}
	return binPath
}

// syncBuffer is a bytes.Buffer safe for a process's output and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// relayProcess runs "outbox relay --mode cdc" on the test's outbox, with
// extra flags after the test's own (a flag given again takes the later
// value).
func (e *env) relayProcess(bin string, extra ...string) (*exec.Cmd, *syncBuffer) {
	e.t.Helper()
	out := &syncBuffer{}
	args := append([]string{"relay", "--mode", "cdc", "--database-url", pgtest.URL(), "--schema", e.schema,
		"--kafka-brokers", strings.Join(e.broker.Addrs(), ","), "--default-topic", e.topic,
		"--kafka-auto-create-topics", "--batch-size", "50", "--poll-interval", "100ms", "--lease", "5s",
		"--metrics-addr", "127.0.0.1:0"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if e.t.Failed() {
			e.t.Logf("relay output:\n%s", out.String())
		}
	})
	return cmd, out
}

func waitOutput(t *testing.T, out *syncBuffer, s string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(out.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q within %s:\n%s", s, within, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The relay process is killed with SIGKILL at random moments while four
// writers commit 1,000 messages, and started again each time: every message
// arrives, in order per aggregate.
func TestProcess_SIGKILLUnderLoad_NothingLostOrderKept(t *testing.T) {
	t.Parallel()
	bin := outboxBinary(t)
	e := newEnv(t, broker.Config{})
	cmd, out := e.relayProcess(bin)
	waitOutput(t, out, "active: streaming from the slot", 30*time.Second)

	wantCh := make(chan map[string]int, 1)
	go func() { wantCh <- e.writeConcurrently(4, 20, 1000, 5) }()
	var want map[string]int
	kills := 0
	for want == nil {
		select {
		case want = <-wantCh:
		case <-time.After(time.Duration(100+rand.IntN(500)) * time.Millisecond):
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		kills++
		cmd, out = e.relayProcess(bin)
	}
	waitOutput(t, out, "active: streaming from the slot", 30*time.Second)
	dups := checkOrder(t, e.consumed(1000, 60*time.Second), want)
	t.Logf("%d kills, %d duplicates", kills, dups)
	checkSlotMetrics(t, out.String(), cdc.DefaultSlot(e.schema))
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("relay exited with %v after SIGTERM; want status 0:\n%s", err, out.String())
	}
}

// checkSlotMetrics scrapes the relay's admin endpoint (its address is in
// the logs) and finds the slot's lag gauges, with the slot streaming.
func checkSlotMetrics(t *testing.T, logs, slot string) {
	t.Helper()
	m := regexp.MustCompile(`"admin endpoint listening" addr=(\S+)`).FindStringSubmatch(logs)
	if m == nil {
		t.Fatalf("no admin endpoint in the relay's logs:\n%s", logs)
	}
	resp, err := http.Get("http://" + m[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	body := string(b)
	for _, want := range []string{
		`outbox_cdc_slot_active{slot="` + slot + `"} 1`,
		`outbox_cdc_slot_lag_bytes{slot="` + slot + `"}`,
		`outbox_cdc_slot_lag_seconds{slot="` + slot + `"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, body)
		}
	}
}

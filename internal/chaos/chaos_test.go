package chaos

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outbox-dev/outbox/internal/pgtest"
)

// testWriter sends each line to t.Log.
type testWriter struct {
	t   *testing.T
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.WriteString(line)
			return len(p), nil
		}
		w.t.Log(strings.TrimRight(line, "\n"))
	}
}

// The whole system, as real processes, through 30 seconds of seeded load
// and faults (relays killed at random, after the broker's ack and inside
// the mark, paused past their lease, restarted in turn; consumers and
// order services killed; the broker stopped; links degraded; late commits
// and rollbacks; poison): every invariant holds afterwards.
func TestRun_ShortSeededRun_AllInvariantsHold(t *testing.T) {
	shortSeededRun(t, false)
}

// The same with the outbox in cursor mode: one relay leads a cursor over
// it and the others stand by, the failpoint faults kill the leader (after
// an ack, and inside the save of its position).
func TestRun_ShortSeededRunInCursorMode_AllInvariantsHold(t *testing.T) {
	shortSeededRun(t, true)
}

func shortSeededRun(t *testing.T, cursor bool) {
	const seed = 20261130
	cfg := Config{
		DatabaseURL: pgtest.URL(),
		Seed:        seed,
		Duration:    30 * time.Second,
		Lease:       5 * time.Second, // room for a loaded machine: publish timeout 2.5 s
		Clients:     4,
		Cursor:      cursor,
		// No bound on the drain in a test (timings are noisy when other
		// packages run too); it must still drain.
		DrainBound:   5 * time.Minute,
		DrainTimeout: 5 * time.Minute,
		Out:          &testWriter{t: t},
	}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("seed %d: the harness failed: %v", seed, err)
	}
	var table strings.Builder
	rep.WriteTable(&table)
	t.Logf("report:\n%s", table.String())
	if !rep.Pass {
		t.Fatalf("seed %d: FAIL %v (logs in %s)", seed, rep.Violated(), rep.WorkDir)
	}
	if rep.FaultsTotal() < 5 || rep.Events.Delivered == 0 || rep.Effects.Once == 0 || rep.DeadLetters.Actual != rep.DeadLetters.Expected {
		t.Errorf("a run that exercised too little: %d faults, %d events delivered, %d effects, %d/%d dead letters",
			rep.FaultsTotal(), rep.Events.Delivered, rep.Effects.Once, rep.DeadLetters.Actual, rep.DeadLetters.Expected)
	}
	if cursor {
		// The failpoint faults must find the leader; one that was still
		// waiting for a message to reach its failpoint when the load ended
		// (scheduled in its last seconds) says nothing about that.
		var missed []string
		for _, s := range rep.Skipped {
			if !strings.Contains(s, CutOffByTheEnd) {
				missed = append(missed, s)
			}
		}
		if len(missed) > 0 {
			t.Errorf("faults not injected: %v", missed)
		}
	}
	if _, err := rep.JSON(); err != nil {
		t.Errorf("report JSON: %v", err)
	}
}

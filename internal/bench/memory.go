package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// runMemory runs the outbox relay as a child process (cfg.RelayBinary) on a
// backlog of cfg.Backlog/10 and then of cfg.Backlog messages, and reads the
// peak resident set of each run. A relay whose memory is bounded by its
// configuration peaks at about the same figure for both.
func (r *runner) runMemory(ctx context.Context, rep *Report) error {
	switch {
	case r.cfg.RelayBinary == "":
		rep.Notes = append(rep.Notes, "memory: not measured: no outbox binary to run as the relay process (Config.RelayBinary)")
		return nil
	case runtime.GOOS != "linux":
		rep.Notes = append(rep.Notes, "memory: not measured: reading a process's peak memory needs Linux's /proc")
		return nil
	}
	small := min(max(r.cfg.Backlog/10, 1000), r.cfg.Backlog)
	m := &MemoryReport{
		Method:       "peak resident set size (VmHWM in /proc/PID/status) of an 'outbox relay' child process",
		SmallBacklog: small, LargeBacklog: r.cfg.Backlog,
	}
	var err error
	if m.SmallPeakBytes, m.SmallDrainPerSecond, err = r.relayProcess(ctx, small); err != nil {
		return fmt.Errorf("relay process, backlog %d: %w", small, err)
	}
	if m.LargePeakBytes, m.LargeDrainPerSecond, err = r.relayProcess(ctx, r.cfg.Backlog); err != nil {
		return fmt.Errorf("relay process, backlog %d: %w", r.cfg.Backlog, err)
	}
	m.Ratio = ratio(float64(m.LargePeakBytes), float64(m.SmallPeakBytes))
	rep.Memory = m
	return nil
}

// relayProcess drains a backlog of n messages with 'outbox relay' and
// returns the process's peak resident memory and its drain rate (from the
// process start to an empty backlog).
func (r *runner) relayProcess(ctx context.Context, n int) (int64, float64, error) {
	tag := fmt.Sprintf("memory_%d", n)
	s, err := r.newScenario(ctx, tag, 2)
	if err != nil {
		return 0, 0, err
	}
	defer s.close()
	if err := s.loadBacklog(ctx, n, r.cfg.Aggregates, tag); err != nil {
		return 0, 0, err
	}
	if err := s.analyze(ctx); err != nil {
		return 0, 0, err
	}
	rc := r.cfg.Relay
	args := []string{"relay",
		"--schema", s.schema,
		"--kafka-brokers", strings.Join(r.brokers, ","),
		"--default-topic", r.cfg.Topic,
		"--kafka-auto-create-topics",
		"--relay-id", "bench-" + tag,
		"--batch-size", strconv.Itoa(rc.BatchSize),
		"--workers", strconv.Itoa(rc.Workers),
		"--lease", rc.Lease.String(),
		"--poll-interval", rc.PollInterval.String(),
		// The flags' 0 is the Config's negative: off, any rate.
		"--linger", max(0, rc.Linger).String(),
		"--linger-above", strconv.FormatFloat(max(0, rc.LingerAbove), 'g', -1, 64),
		"--log-level", "warn",
	}
	if rc.DisableListen {
		args = append(args, "--no-listen")
	}
	cmd := exec.Command(r.cfg.RelayBinary, args...)
	// The database URL goes through the environment, not the command line,
	// where other users of the machine could read a password.
	cmd.Env = childEnv(r.cfg.DatabaseURL)
	out := &tailBuffer{max: 16 << 10}
	cmd.Stdout, cmd.Stderr = out, out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, fmt.Errorf("start %s: %w", r.cfg.RelayBinary, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	running := true
	defer func() {
		if running {
			_ = cmd.Process.Kill()
			<-exited
		}
	}()

	var drained time.Duration
	last, lastChange, lastPrint := int64(-1), time.Now(), time.Now()
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for drained == 0 {
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case err := <-exited:
			running = false
			return 0, 0, fmt.Errorf("relay process exited early (%v); its output:\n%s", err, out.String())
		case <-t.C:
		}
		left, err := s.unsent(ctx)
		if err != nil {
			return 0, 0, err
		}
		now := time.Now()
		switch {
		case left == 0:
			drained = now.Sub(start)
		case left != last:
			last, lastChange = left, now
		case now.Sub(lastChange) > r.cfg.StallTimeout:
			return 0, 0, fmt.Errorf("relay process: %w for %s with %d unsent; its output:\n%s", errStalled, r.cfg.StallTimeout, left, out.String())
		}
		if now.Sub(lastPrint) >= time.Second {
			r.prog.printf("relay process draining %d: %d left", n, left)
			lastPrint = now
		}
	}
	peak, err := peakRSS(cmd.Process.Pid)
	if err != nil {
		return 0, 0, err
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		running = false
		if err != nil {
			return 0, 0, fmt.Errorf("relay process did not exit cleanly on SIGTERM (%v); its output:\n%s", err, out.String())
		}
	case <-time.After(rc.ShutdownTimeout + 30*time.Second):
		return 0, 0, fmt.Errorf("relay process did not exit within %s of SIGTERM", rc.ShutdownTimeout+30*time.Second)
	}
	if err := s.checkAllSent(ctx, int64(n)); err != nil {
		return 0, 0, err
	}
	return peak, float64(n) / drained.Seconds(), nil
}

// childEnv is the process environment without OUTBOX_* variables, which
// would otherwise configure the child relay, plus the database URL.
func childEnv(databaseURL string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OUTBOX_") {
			env = append(env, kv)
		}
	}
	return append(env, "OUTBOX_DATABASE_URL="+databaseURL)
}

// peakRSS reads VmHWM, the peak resident set size, of a live process.
func peakRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("peak memory: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "VmHWM:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("peak memory: parse VmHWM %q: %w", v, err)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("peak memory: %w", err)
	}
	return 0, fmt.Errorf("peak memory: no VmHWM in /proc/%d/status", pid)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if extra := b.buf.Len() - b.max; extra > 0 {
		b.buf.Next(extra)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

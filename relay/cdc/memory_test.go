package cdc_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/broker"
)

// While the broker holds every produce request unanswered, 1,000 messages
// of 4 MiB are committed: the relay reads the stream only until the
// messages it holds reach --cdc-max-in-flight-bytes, and its process's
// peak resident memory stays under the documented figure (docs/cdc.md,
// "Memory"). The relay runs as a process of its own, so that its peak RSS
// (VmHWM) is its memory alone, without the broker's or the test's; the
// reading is taken once the stream paused at the bound and the stalled
// publishes were retried several times, so that nothing more is read. Once
// the broker answers again, messages flow.
func TestProcess_BrokerStalled_MemoryStaysWithinTheBound(t *testing.T) {
	t.Parallel()
	bin := outboxBinary(t)
	const (
		rows     = 1000
		size     = 4 << 20
		bound    = 32 << 20
		limitMiB = (2*(bound+8*size))>>20 + 64 // docs/cdc.md, "Memory"
		retries  = 3
	)
	e := newEnv(t, broker.Config{MaxMessageBytes: 2 * size})
	produces, release := e.stallProduce()
	cmd, out := e.relayProcess(bin, "--cdc-max-in-flight-bytes", strconv.Itoa(bound),
		"--kafka-max-message-bytes", strconv.Itoa(2*size), "--publish-timeout", "1s",
		"--unavailable-backoff-max", "1s", "--log-level", "debug")
	waitOutput(t, out, "active: streaming from the slot", 30*time.Second)
	e.insertLarge(rows, size)

	peak := func() int64 {
		hwm, err := procStatusKiB(cmd.Process.Pid, "VmHWM")
		if err != nil {
			t.Fatalf("read the relay's peak memory: %v\n%s", err, out.String())
		}
		return hwm >> 10
	}
	const paused = "stream paused: the messages held reach MaxInFlightBytes"
	const unavailable = "broker unavailable; the stream waits"
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if p := peak(); p > limitMiB {
			t.Fatalf("relay's peak RSS %d MiB > %d MiB with the broker stalled", p, limitMiB)
		}
		logs := out.String()
		if i := strings.Index(logs, paused); i >= 0 && strings.Count(logs[i:], unavailable) >= retries {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stream did not pause at the bound with the publishes retried %d times (%d produce requests held):\n%s",
				retries, produces.Load(), tail(out.String(), 4000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	p := peak()
	t.Logf("relay's peak RSS %d MiB with the broker stalled (bound %d MiB, messages of %d MiB, documented limit %d MiB, %d produce requests held)",
		p, bound>>20, size>>20, limitMiB, produces.Load())
	if p > limitMiB {
		t.Fatalf("relay's peak RSS %d MiB > %d MiB", p, limitMiB)
	}

	release()
	const flowing = 20
	deadline = time.Now().Add(2 * time.Minute)
	for e.counts()[outbox.StatusSent] < flowing {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d messages SENT after the broker answered again: %v\n%s", flowing, e.counts(), tail(out.String(), 4000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stallProduce makes the broker hold every produce request unanswered until
// release is called (or the test ends). It returns the number of produce
// requests received.
func (e *env) stallProduce() (*atomic.Int64, func()) {
	var n atomic.Int64
	gate := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	e.t.Cleanup(release)
	c := e.broker.Cluster()
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		n.Add(1)
		c.SleepControl(func() { <-gate })
		return nil, nil, false
	})
	return &n, release
}

// insertLarge commits n messages with payloads of size bytes, generated in
// the database (a repeated text, so that the table and the WAL stay small
// while the stream carries every byte), in transactions of 100.
func (e *env) insertLarge(n, size int) {
	e.t.Helper()
	ctx := context.Background()
	q := fmt.Sprintf(`INSERT INTO %s.outbox_messages
		(id, aggregate_type, aggregate_id, event_type, event_version, payload, content_type)
		SELECT gen_random_uuid(), 'Order', 'agg-' || i, 'Large', 1,
		       convert_to(repeat(md5(i::text), $3 / 32), 'UTF8'), 'application/octet-stream'
		FROM generate_series($1::int, $2::int) i`, pgx.Identifier{e.schema}.Sanitize())
	for from := 1; from <= n; from += 100 {
		err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
			// lz4 compresses the repeated text much faster than pglz; a
			// server built without it keeps pglz.
			_, _ = tx.Exec(ctx, "SAVEPOINT lz4")
			if _, err := tx.Exec(ctx, "SET LOCAL default_toast_compression = lz4"); err != nil {
				_, _ = tx.Exec(ctx, "ROLLBACK TO SAVEPOINT lz4")
			}
			_, err := tx.Exec(ctx, q, from, min(from+99, n), size)
			return err
		})
		if err != nil {
			e.t.Fatalf("insert large messages: %v", err)
		}
	}
}

// procStatusKiB reads a "kB" field of /proc/pid/status, in KiB.
func procStatusKiB(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

package sqlitestore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/store/sqlitestore"
)

// orderedSink records, per aggregate, the counters of the payloads it
// acknowledged, in publish order. The first attempt of every failEvery-th
// message fails with a retriable error, so that retries run under load too.
type orderedSink struct {
	failEvery int

	mu        sync.Mutex
	published map[string][]int // aggregate id -> payload counters
	failed    int
}

type counterPayload struct {
	N int `json:"n"`
}

func (s *orderedSink) Publish(_ context.Context, recs []outbox.Record) []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	errs := make([]error, len(recs))
	for i, r := range recs {
		var p counterPayload
		if err := json.Unmarshal(r.Payload, &p); err != nil {
			errs[i] = fmt.Errorf("bad payload: %w", err)
			continue
		}
		if r.Attempts == 0 && p.N%s.failEvery == s.failEvery-1 {
			s.failed++
			errs[i] = errors.New("injected: not enough replicas")
			continue
		}
		s.published[r.AggregateID] = append(s.published[r.AggregateID], p.N)
	}
	return errs
}

func (s *orderedSink) Close() error { return nil }

// logRecorder keeps the message and attributes of every log record.
type logRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	l.lines = append(l.lines, b.String())
	l.mu.Unlock()
	return nil
}

// TestLoad_WritersAndRelayNeverSeeDatabaseIsLocked runs four application
// writers, each committing business rows with their events one transaction
// at a time, while a relay drains the outbox. No call may fail with
// SQLITE_BUSY ("database is locked"), every message must be sent exactly
// once, and every aggregate's events must reach the sink in enqueue order.
func TestLoad_WritersAndRelayNeverSeeDatabaseIsLocked(t *testing.T) {
	t.Parallel()
	const (
		writers       = 4
		msgsPerTx     = 2
		aggsPerWriter = 25
	)
	// 4,000 messages; 2,000 under the race detector, which is there to
	// check the Go side and slows SQLite down too much for the full run.
	txPerWriter := 500
	if raceEnabled {
		txPerWriter = 250
	}
	total := writers * txPerWriter * msgsPerTx
	b := setup(t)
	ctx := testCtx(t)
	if _, err := b.db.ExecContext(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY, n INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}

	logs := &logRecorder{}
	sink := &orderedSink{failEvery: 10, published: map[string][]int{}}
	r, err := relay.New(relay.Config{
		Store:        b.store,
		Sink:         sink,
		BatchSize:    50,
		PollInterval: sqlitestore.PollInterval,
		RetryBase:    10 * time.Millisecond,
		RetryMax:     50 * time.Millisecond,
		Logger:       slog.New(logs),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer r.Stop(context.Background())

	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			next := make([]int, aggsPerWriter) // per aggregate: the next counter
			for i := range txPerWriter {
				k := i % aggsPerWriter
				agg := fmt.Sprintf("w%d-order-%d", w, k)
				err := func() error {
					tx, err := b.db.BeginTx(ctx, nil)
					if err != nil {
						return err
					}
					defer tx.Rollback()
					if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, n) VALUES (?, ?)`, fmt.Sprintf("%s-%d", agg, i), next[k]); err != nil {
						return err
					}
					if err := b.store.Enqueue(ctx, tx,
						outbox.Message{AggregateType: "Order", AggregateID: agg, EventType: "OrderPlaced",
							Payload: fmt.Appendf(nil, `{"n":%d}`, next[k])},
						outbox.Message{AggregateType: "Order", AggregateID: agg, EventType: "OrderConfirmed",
							Payload: fmt.Appendf(nil, `{"n":%d}`, next[k]+1)},
					); err != nil {
						return err
					}
					return tx.Commit()
				}()
				if err != nil {
					t.Errorf("writer %d, transaction %d: %v", w, i, err)
					return
				}
				next[k] += msgsPerTx
			}
		})
	}
	start := time.Now()
	wg.Wait()
	t.Logf("writers took %v", time.Since(start))

	deadline := time.Now().Add(40 * time.Second)
	for {
		counts, err := b.store.Counts(ctx)
		if err != nil {
			t.Fatalf("Counts: %v", err)
		}
		if counts[outbox.StatusSent] == int64(total) {
			break
		}
		if time.Now().After(deadline) || t.Failed() {
			t.Fatalf("not all sent: %v", counts)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("all sent after %v", time.Since(start))
	if err := r.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}

	var orders int
	if err := b.db.QueryRowContext(ctx, `SELECT count(*) FROM orders`).Scan(&orders); err != nil || orders != writers*txPerWriter {
		t.Errorf("orders = %d, %v; want %d", orders, err, writers*txPerWriter)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if sink.failed == 0 {
		t.Error("no publish failed: the retry path was not exercised")
	}
	if len(sink.published) != writers*aggsPerWriter {
		t.Errorf("%d aggregates published, want %d", len(sink.published), writers*aggsPerWriter)
	}
	for agg, ns := range sink.published {
		want := make([]int, txPerWriter/aggsPerWriter*msgsPerTx)
		for i := range want {
			want[i] = i
		}
		if !slices.Equal(ns, want) {
			t.Errorf("aggregate %s published %v, want 0..%d once each, in order", agg, ns, len(want)-1)
		}
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	for _, line := range logs.lines {
		lower := strings.ToLower(line)
		if strings.Contains(lower, "locked") || strings.Contains(lower, "busy") {
			t.Errorf("relay log: %s", line)
		}
		if strings.HasPrefix(line, "WARN") && !strings.Contains(line, "publish failed; retry scheduled") ||
			strings.HasPrefix(line, "ERROR") {
			t.Errorf("unexpected relay log: %s", line)
		}
	}
}

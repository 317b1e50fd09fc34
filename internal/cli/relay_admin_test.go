package cli

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// adminWatch watches the pools of a relay command: the connections the
// admin's pool holds at once, and the statistics reads on each pool.
type adminWatch struct {
	mu         sync.Mutex
	live       int
	maxLive    int
	statsReads map[string]int // by pool purpose
}

// statsMarker starts ops' statistics query (ops/queries/stats_head.sql),
// one per Stats read.
const statsMarker = "-- Ops.Stats: the database clock"

func (w *adminWatch) hook(purpose string, cfg *pgxpool.Config) {
	cfg.ConnConfig.Tracer = &statsTracer{w: w, purpose: purpose}
	if purpose != "relay admin" {
		return
	}
	cfg.AfterConnect = func(context.Context, *pgx.Conn) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.live++
		w.maxLive = max(w.maxLive, w.live)
		return nil
	}
	cfg.BeforeClose = func(*pgx.Conn) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.live--
	}
}

func (w *adminWatch) reads(purpose string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.statsReads[purpose]
}

// statsTracer counts the batches that read the statistics.
type statsTracer struct {
	w       *adminWatch
	purpose string
}

func (s *statsTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (s *statsTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *statsTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	for _, q := range data.Batch.QueuedQueries {
		if strings.HasPrefix(q.SQL, statsMarker) {
			s.w.mu.Lock()
			if s.w.statsReads == nil {
				s.w.statsReads = map[string]int{}
			}
			s.w.statsReads[s.purpose]++
			s.w.mu.Unlock()
		}
	}
	return ctx
}
func (s *statsTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (s *statsTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// scrapers are clients looping on the admin endpoint's pages.
type scrapers struct {
	// requests counts the answers; throttled those that were 429 Too
	// Many Requests, the endpoint's answer beyond its rates.
	requests, throttled, failures atomic.Int64
	firstFailure                  atomic.Value // string
	lastMetrics                   atomic.Value // string: the last /metrics body
	stop                          context.CancelFunc
	wg                            sync.WaitGroup
}

// startScrapers starts n clients that each fetch /metrics, /readyz and /
// in a loop, without pause, until stopped.
func startScrapers(base string, n int) *scrapers {
	ctx, cancel := context.WithCancel(context.Background())
	s := &scrapers{stop: cancel}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	for range n {
		s.wg.Go(func() {
			for ctx.Err() == nil {
				for _, path := range []string{"/metrics", "/readyz", "/"} {
					s.get(ctx, client, base, path)
				}
			}
		})
	}
	return s
}

func (s *scrapers) get(ctx context.Context, client *http.Client, base, path string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	resp, err := client.Do(req)
	if ctx.Err() != nil {
		return
	}
	s.requests.Add(1)
	if err != nil {
		s.fail(path + ": " + err.Error())
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusTooManyRequests {
		s.throttled.Add(1)
		return
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		s.fail(path + ": " + resp.Status + ": " + string(b))
	}
	if path == "/metrics" {
		b, _ := io.ReadAll(resp.Body)
		s.lastMetrics.Store(string(b))
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
}

func (s *scrapers) fail(what string) {
	s.failures.Add(1)
	s.firstFailure.CompareAndSwap(nil, what)
}

func (s *scrapers) halt() {
	s.stop()
	s.wg.Wait()
}

// Fifty clients looping on /metrics, /readyz and the status page while a
// backlog drains cost the database at most one statistics read per
// statsInterval, all on the admin's own pool, which never holds more than
// its connections; and the relay loses no lease to them.
func TestRelayAdmin_ManyScrapersCostBoundedReadsAndNoLease(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t)
	f.enqueue(t, 10_000)
	env := relayEnv(t, f)
	var w adminWatch
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := &syncBuffer{}
	a := &app{stdout: io.Discard, stderr: stderr, lookupEnv: mapEnv(env), poolHook: w.hook}
	done := make(chan int, 1)
	began := time.Now()
	go func() { done <- runApp(ctx, Program{}, a, []string{"relay"}) }()

	sc := startScrapers(adminAddr(t, stderr, done), 50)
	f.waitSent(t, 3*time.Minute, stderr)
	time.Sleep(statsInterval) // and on: the bound must hold over more than one interval
	sc.halt()
	cancel()
	if code := exitCode(t, done, stderr); code != exitOK {
		t.Fatalf("relay exited with %d, want 0; stderr:\n%s", code, stderr.String())
	}
	elapsed := time.Since(began)

	if n := sc.requests.Load(); n < 150 || sc.failures.Load() != 0 {
		t.Fatalf("%d requests by the scrapers, %d failed (the first: %v); want at least 150, none failed", n, sc.failures.Load(), sc.firstFailure.Load())
	}
	bound := int(elapsed/statsInterval) + 1
	if n := w.reads("relay admin"); n > bound || n < 1 {
		t.Errorf("%d statistics reads in %s for %d requests; want between 1 and %d", n, elapsed.Round(time.Millisecond), sc.requests.Load(), bound)
	}
	if n := w.reads("relay"); n != 0 {
		t.Errorf("%d statistics reads on the relay's pool; want none", n)
	}
	if w.maxLive > adminPoolSize {
		t.Errorf("the admin's pool held %d connections at once; want at most %d", w.maxLive, adminPoolSize)
	}
	metrics, _ := sc.lastMetrics.Load().(string)
	if !strings.Contains(metrics, "outbox_relay_fenced_total 0") || strings.Contains(stderr.String(), "lease was taken over") {
		t.Errorf("the relay lost a lease under the scrapers; /metrics:\n%s", metrics)
	}
	t.Logf("%d requests (%d throttled) in %s, %d statistics reads, admin pool at most %d connections",
		sc.requests.Load(), sc.throttled.Load(), elapsed.Round(time.Millisecond), w.reads("relay admin"), w.maxLive)
}

// BenchmarkRelayDrain_AdminScrapers measures how fast a relay command
// drains a backlog of 100,000 messages (over 100 aggregates, to an
// in-memory broker), alone and with 50 clients looping on /metrics, /readyz
// and the status page. Reported as events/s; run it with
//
//	go test -run '^$' -bench RelayDrain_AdminScrapers -benchtime 1x -count 3 ./internal/cli/
func BenchmarkRelayDrain_AdminScrapers(b *testing.B) {
	for _, n := range []int{0, 50} {
		b.Run(map[int]string{0: "alone", 50: "50-scrapers"}[n], func(b *testing.B) {
			var rate float64
			for range b.N {
				rate += drainRate(b, 100_000, n)
			}
			b.ReportMetric(rate/float64(b.N), "events/s")
		})
	}
}

// drainRate starts a relay on a backlog of backlog messages, with n
// scrapers, and returns the messages sent per second until none is left.
func drainRate(b *testing.B, backlog, n int) float64 {
	b.StopTimer()
	f := newOpsFixture(b)
	f.enqueue(b, backlog)
	f.exec(b, "VACUUM ANALYZE {{schema}}.outbox_messages")
	env := relayEnv(b, f)
	env["OUTBOX_LOG_LEVEL"] = "warn"
	_, stderr, stop, done := startCLI(env, "relay", "--log-level", "info")
	defer stop()
	base := adminAddr(b, stderr, done)
	if n > 0 {
		sc := startScrapers(base, n)
		defer sc.halt()
	}
	stderr.WaitFor(b, "relay started", 30*time.Second, done)
	b.StartTimer()
	began := time.Now()
	f.waitSent(b, 10*time.Minute, stderr)
	elapsed := time.Since(began)
	b.StopTimer()
	return float64(backlog) / elapsed.Seconds()
}

package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outbox-dev/outbox/admin"
)

func start(t *testing.T, cfg admin.Config) string {
	t.Helper()
	cfg.Addr = "127.0.0.1:0"
	s, err := admin.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return "http://" + s.Addr()
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestDefaultAddrIsLoopback(t *testing.T) {
	if !admin.IsLoopback(admin.DefaultAddr) {
		t.Fatalf("default admin address %s is not loopback", admin.DefaultAddr)
	}
	for addr, want := range map[string]bool{"127.0.0.1:1": true, "[::1]:1": true, "localhost:1": true, "0.0.0.0:1": false, ":1": false, "10.1.2.3:1": false} {
		if got := admin.IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v; want %v", addr, got, want)
		}
	}
}

func TestHealthzAnswersWhileADependencyIsDown(t *testing.T) {
	t.Parallel()
	base := start(t, admin.Config{Checks: map[string]admin.Check{"database": func(context.Context) error { return errors.New("down") }}})
	if code, body := get(t, base+"/healthz"); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Fatalf("/healthz = %d %q; want 200 ok", code, body)
	}
}

func TestReadyzNamesTheFailingDependency(t *testing.T) {
	t.Parallel()
	base := start(t, admin.Config{CheckTimeout: 200 * time.Millisecond, Checks: map[string]admin.Check{
		"database": func(context.Context) error { return nil },
		"kafka":    func(context.Context) error { return errors.New("dial tcp 127.0.0.1:9092: connection refused") },
		"slow": func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		},
	}})
	code, body := get(t, base+"/readyz")
	var res struct {
		Ready  bool
		Checks map[string]string
	}
	if err := json.Unmarshal([]byte(body), &res); err != nil {
		t.Fatalf("/readyz body %q: %v", body, err)
	}
	if code != http.StatusServiceUnavailable || res.Ready || res.Checks["database"] != "ok" ||
		!strings.Contains(res.Checks["kafka"], "connection refused") || !strings.Contains(res.Checks["slow"], "deadline") {
		t.Fatalf("/readyz = %d %s; want 503 naming kafka and the timed-out check", code, body)
	}
}

func TestReadyzOKWhenEveryCheckPasses(t *testing.T) {
	t.Parallel()
	base := start(t, admin.Config{Checks: map[string]admin.Check{"database": func(context.Context) error { return nil }}})
	if code, body := get(t, base+"/readyz"); code != 200 || !strings.Contains(body, `"ready":true`) {
		t.Fatalf("/readyz = %d %s; want 200 ready", code, body)
	}
}

func TestMetricsEndpointServesTheGatherer(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "test_total", Help: "t"})
	reg.MustRegister(c)
	c.Add(3)
	base := start(t, admin.Config{Gatherer: reg})
	if code, body := get(t, base+"/metrics"); code != 200 || !strings.Contains(body, "test_total 3") {
		t.Fatalf("/metrics = %d %q", code, body)
	}
}

// Any number of clients polling /readyz cost the dependencies at most one
// round of checks per CheckInterval.
func TestReadyz_ManyClientsRunTheChecksAtMostOncePerInterval(t *testing.T) {
	t.Parallel()
	const interval = 100 * time.Millisecond
	var runs atomic.Int64
	base := start(t, admin.Config{CheckInterval: interval, Checks: map[string]admin.Check{
		"database": func(context.Context) error { runs.Add(1); return nil },
	}})
	begin := time.Now()
	stop := begin.Add(time.Second)
	var wg sync.WaitGroup
	var answers atomic.Int64
	for range 50 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				resp, err := http.Get(base + "/readyz")
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("/readyz = %d; want 200", resp.StatusCode)
					return
				}
				answers.Add(1)
			}
		})
	}
	wg.Wait()
	bound := int64(time.Since(begin)/interval) + 1
	if n := runs.Load(); n > bound {
		t.Fatalf("the check ran %d times for %d answers; want at most %d", n, answers.Load(), bound)
	}
}

// A client that trickles its request headers (slow loris) is cut off after
// ReadHeaderTimeout instead of holding its connection open.
func TestServer_CutsOffAClientTricklingHeaders(t *testing.T) {
	t.Parallel()
	const headerTimeout = 300 * time.Millisecond
	base := start(t, admin.Config{ReadHeaderTimeout: headerTimeout})
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	// One header byte every 50ms: 100 of them would take 5s.
	begin := time.Now()
	for i := range 100 {
		if _, err := conn.Write([]byte{'a' + byte(i%26)}); err != nil {
			break // the server closed the connection
		}
		_ = conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := conn.Read(make([]byte, 512)); err == io.EOF || (err != nil && !isTimeout(err)) {
			break // EOF or reset: cut off
		} else if err == nil {
			break // the server answered (an error page) and will close
		}
	}
	cutAfter := time.Since(begin)
	if cutAfter >= 4*time.Second {
		t.Fatalf("a client trickling headers was served for %s; want it cut off after about %s", cutAfter, headerTimeout)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// However many clients loop on the pages, the server serves at most
// MaxRequestRate of them per second (plus one burst); the others wait up to
// MaxWait and then get 429 with Retry-After.
func TestServer_ServesPagesWithinMaxRequestRate(t *testing.T) {
	t.Parallel()
	const perSecond = 10
	var served atomic.Int64
	s, err := admin.New(admin.Config{Addr: "127.0.0.1:0", MaxRequestRate: perSecond, MaxWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s.Handle("GET /page", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { served.Add(1) }))
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	begin := time.Now()
	stop := begin.Add(time.Second)
	var wg sync.WaitGroup
	var refused atomic.Int64
	for range 50 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				resp, err := http.Get("http://" + s.Addr() + "/page")
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") != "" {
					refused.Add(1)
				}
			}
		})
	}
	wg.Wait()
	bound := int64(time.Since(begin).Seconds()*perSecond) + perSecond + 1
	if n := served.Load(); n > bound || n == 0 {
		t.Fatalf("served %d requests; want between 1 and %d", n, bound)
	}
	if refused.Load() == 0 {
		t.Fatal("no request got 429 with Retry-After")
	}
}

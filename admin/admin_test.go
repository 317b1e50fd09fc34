package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
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

package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Every connection is bounded: a server whose timeouts were left unset would
// let slow clients hold connections open for ever.
func TestNew_SetsEveryServerTimeout(t *testing.T) {
	for _, cfg := range []Config{{}, {ReadHeaderTimeout: 1, ReadTimeout: 2, WriteTimeout: 3, IdleTimeout: 4}} {
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		srv := s.srv
		if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 {
			t.Fatalf("server timeouts: header %s, read %s, write %s, idle %s; want all set",
				srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout)
		}
		if cfg.ReadTimeout != 0 && (srv.ReadHeaderTimeout != 1 || srv.ReadTimeout != 2 || srv.WriteTimeout != 3 || srv.IdleTimeout != 4) {
			t.Fatalf("configured timeouts not used: %+v", srv)
		}
	}
}

// A client on another host learns which check fails, not why: the error
// text may name hosts, users or broker addresses. A loopback client gets
// the reason.
func TestReadyz_NoErrorTextForClientsOffLoopback(t *testing.T) {
	t.Parallel()
	const secret = "dial tcp db.internal:5432: password authentication failed for user relay"
	s, err := New(Config{Checks: map[string]Check{
		"database": func(context.Context) error { return errors.New(secret) },
		"kafka":    func(context.Context) error { return nil },
	}})
	if err != nil {
		t.Fatal(err)
	}
	for remote, wantDetail := range map[string]bool{"10.1.2.3:40000": false, "[2001:db8::1]:40000": false, "127.0.0.1:40000": true, "[::1]:40000": true} {
		req := httptest.NewRequest(http.MethodGet, "/readyz", nil)
		req.RemoteAddr = remote
		rec := httptest.NewRecorder()
		s.mux.ServeHTTP(rec, req)
		var res readiness
		if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil {
			t.Fatalf("%s: body %q: %v", remote, rec.Body, err)
		}
		if rec.Code != http.StatusServiceUnavailable || res.Ready || res.Checks["kafka"] != "ok" {
			t.Fatalf("%s: /readyz = %d %s; want 503 with kafka ok", remote, rec.Code, rec.Body)
		}
		if got := strings.Contains(rec.Body.String(), "db.internal"); got != wantDetail {
			t.Errorf("%s: error text shown = %v, want %v: %s", remote, got, wantDetail, rec.Body)
		}
		if !wantDetail && res.Checks["database"] != notReady {
			t.Errorf("%s: database check %q; want %q", remote, res.Checks["database"], notReady)
		}
	}
}

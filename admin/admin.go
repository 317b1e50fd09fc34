// Package admin is the relay's and consumers' HTTP endpoint for operators:
// /healthz (the process is alive), /readyz (its dependencies answer),
// /metrics (Prometheus) and whatever pages a caller mounts. It binds to
// loopback by default; binding elsewhere is an explicit choice.
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultAddr is the default of Config.Addr: loopback only.
const DefaultAddr = "127.0.0.1:9464"

// Check reports whether a dependency is usable; nil means ready.
type Check func(ctx context.Context) error

// Config configures a Server.
type Config struct {
	// Addr is the listen address. Defaults to "127.0.0.1:9464" (loopback).
	// Port 0 picks a free port.
	Addr string
	// Gatherer is exported at /metrics. Defaults to none (no /metrics).
	Gatherer prometheus.Gatherer
	// Checks are run by /readyz, each with CheckTimeout. Defaults to none.
	Checks map[string]Check
	// CheckTimeout bounds each readiness check. Defaults to 2s.
	CheckTimeout time.Duration
	// Logger. Defaults to slog.Default().
	Logger *slog.Logger
}

// Server serves the admin endpoints.
type Server struct {
	cfg Config
	mux *http.ServeMux
	srv *http.Server
	ln  net.Listener

	closeOnce sync.Once
	done      chan struct{}
}

// New validates cfg and builds the handlers; Start listens.
func New(cfg Config) (*Server, error) {
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	if cfg.CheckTimeout == 0 {
		cfg.CheckTimeout = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
		return nil, fmt.Errorf("admin: Addr %q must be host:port: %w", cfg.Addr, err)
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), done: make(chan struct{})}
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	s.mux.HandleFunc("GET /readyz", s.readyz)
	if cfg.Gatherer != nil {
		s.mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn)}))
	}
	return s, nil
}

// Handle mounts another handler (a status page) on the server's mux.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// IsLoopback reports whether addr's host is a loopback address or
// "localhost".
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Start listens and serves in the background.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("admin: listen on %s: %w", s.cfg.Addr, err)
	}
	if !IsLoopback(s.cfg.Addr) {
		s.cfg.Logger.Warn("admin endpoint is reachable from other hosts", slog.String("addr", ln.Addr().String()))
	}
	s.ln = ln
	s.srv = &http.Server{Handler: s.mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.cfg.Logger.Error("admin server", slog.Any("error", err))
		}
	}()
	return nil
}

// Addr is the address the server listens on (after Start).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close shuts the server down, waiting for requests up to ctx.
func (s *Server) Close(ctx context.Context) error {
	var err error
	s.closeOnce.Do(func() {
		if s.srv == nil {
			return
		}
		err = s.srv.Shutdown(ctx)
		<-s.done
	})
	return err
}

type readiness struct {
	Ready  bool              `json:"ready"`
	Checks map[string]string `json:"checks"`
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	names := make([]string, 0, len(s.cfg.Checks))
	for n := range s.cfg.Checks {
		names = append(names, n)
	}
	sort.Strings(names)
	res := readiness{Ready: true, Checks: map[string]string{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(r.Context(), s.cfg.CheckTimeout)
			defer cancel()
			err := s.cfg.Checks[n](ctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.Ready = false
				res.Checks[n] = err.Error()
			} else {
				res.Checks[n] = "ok"
			}
		})
	}
	wg.Wait()
	w.Header().Set("Content-Type", "application/json")
	if !res.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(res)
}

// Package admin is the relay's and consumers' HTTP endpoint for operators:
// /healthz (the process is alive), /readyz (its dependencies answer),
// /metrics (Prometheus) and whatever pages a caller mounts. It binds to
// loopback by default; binding elsewhere is an explicit choice.
//
//	srv, err := admin.New(admin.Config{
//		Addr:     "127.0.0.1:9464",
//		Gatherer: reg, // a prometheus.Gatherer, served at /metrics
//		Checks:   map[string]admin.Check{"database": pool.Ping, "kafka": snk.Ping},
//	})
//	...
//	srv.Handle("/", page) // a statuspage.Page, or any http.Handler
//	if err := srv.Start(); err != nil {
//		return err
//	}
//	defer srv.Close(context.Background())
//
// # Safe under load and from afar
//
// The server bounds every connection: headers must arrive within
// ReadHeaderTimeout, a whole request within ReadTimeout, a response must be
// written within WriteTimeout, and an idle keep-alive connection is closed
// after IdleTimeout, so slow or stalled clients cannot hold connections
// open. /readyz runs its checks at most once per CheckInterval, however
// many clients ask. The server answers at most MaxRequestRate requests per
// second to /metrics and the mounted pages together, and MaxProbeRate to
// /healthz and /readyz: a request beyond the rate waits its turn, up to
// MaxWait, and then gets 429 Too Many Requests. So any number of clients,
// however fast they loop, cost the process and its database a bounded
// share of their time. It tells loopback clients why a check fails; a client
// on another host learns only each check's name and "ok" or "not ready",
// never error text that could name hosts, users or broker addresses.
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/time/rate"

	"github.com/outbox-dev/outbox/internal/conf"
	"github.com/outbox-dev/outbox/internal/memo"
)

// DefaultAddr is the default of Config.Addr: loopback only.
const DefaultAddr = "127.0.0.1:9464"

// Defaults of Config's durations.
const (
	DefaultCheckTimeout      = 2 * time.Second
	DefaultCheckInterval     = time.Second
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 10 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultMaxWait           = 5 * time.Second
)

// Defaults of Config's rates, in requests per second.
const (
	DefaultMaxRequestRate = 20
	DefaultMaxProbeRate   = 100
)

// notReady is what a client off loopback sees of a failing check.
const notReady = "not ready"

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
	// CheckInterval is how long /readyz reuses the checks' results: the
	// checks run at most once per interval, however many clients ask.
	// Defaults to 1s.
	CheckInterval time.Duration
	// ReadHeaderTimeout bounds the reading of a request's headers.
	// Defaults to 5s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds the reading of a whole request. Defaults to 10s.
	ReadTimeout time.Duration
	// WriteTimeout bounds a request from the end of its headers to the end
	// of the response; it must exceed CheckTimeout and the slowest scrape.
	// Defaults to 30s.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that waits this long for
	// its next request. Defaults to 60s.
	IdleTimeout time.Duration
	// MaxRequestRate bounds the requests per second served to /metrics and
	// the pages mounted with Handle, together, in bursts of up to as many.
	// Defaults to 20.
	MaxRequestRate float64
	// MaxProbeRate bounds the requests per second served to /healthz and
	// /readyz, together. Defaults to 100.
	MaxProbeRate float64
	// MaxWait is the longest a request waits for its turn under the rates;
	// one that would wait longer gets 429 at once. Defaults to 5s.
	MaxWait time.Duration
	// Logger. Defaults to slog.Default().
	Logger *slog.Logger
}

// Server serves the admin endpoints.
type Server struct {
	cfg    Config
	mux    *http.ServeMux
	srv    *http.Server
	ln     net.Listener
	ready  *memo.Value[readiness]
	pages  *rate.Limiter
	probes *rate.Limiter

	closeOnce sync.Once
	done      chan struct{}
}

// New validates cfg and builds the handlers; Start listens.
func New(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
		return nil, fmt.Errorf("admin: Addr %q must be host:port: %w", cfg.Addr, err)
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), done: make(chan struct{}),
		pages:  rate.NewLimiter(rate.Limit(cfg.MaxRequestRate), max(1, int(cfg.MaxRequestRate))),
		probes: rate.NewLimiter(rate.Limit(cfg.MaxProbeRate), max(1, int(cfg.MaxProbeRate)))}
	s.ready = memo.New(s.runChecks, cfg.CheckInterval, cfg.CheckTimeout+time.Second)
	s.srv = &http.Server{Handler: s.mux, ReadHeaderTimeout: cfg.ReadHeaderTimeout, ReadTimeout: cfg.ReadTimeout,
		WriteTimeout: cfg.WriteTimeout, IdleTimeout: cfg.IdleTimeout,
		ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn)}
	s.mux.Handle("GET /healthz", s.limit(s.probes, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})))
	s.mux.Handle("GET /readyz", s.limit(s.probes, http.HandlerFunc(s.readyz)))
	if cfg.Gatherer != nil {
		s.Handle("GET /metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn)}))
	}
	return s, nil
}

// withDefaults fills in the zero fields.
func (cfg Config) withDefaults() Config {
	conf.Default(&cfg.CheckTimeout, DefaultCheckTimeout)
	conf.Default(&cfg.CheckInterval, DefaultCheckInterval)
	conf.Default(&cfg.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	conf.Default(&cfg.ReadTimeout, DefaultReadTimeout)
	conf.Default(&cfg.WriteTimeout, DefaultWriteTimeout)
	conf.Default(&cfg.IdleTimeout, DefaultIdleTimeout)
	conf.Default(&cfg.MaxWait, DefaultMaxWait)
	conf.Default(&cfg.MaxRequestRate, DefaultMaxRequestRate)
	conf.Default(&cfg.MaxProbeRate, DefaultMaxProbeRate)
	conf.Default(&cfg.Addr, DefaultAddr)
	conf.Default(&cfg.Logger, slog.Default())
	return cfg
}

// Handle mounts another handler (a status page) on the server's mux,
// within MaxRequestRate.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, s.limit(s.pages, h)) }

// limit serves h within l's rate: a request waits for its turn up to
// MaxWait, and gets 429 if its turn would come later.
func (s *Server) limit(l *rate.Limiter, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.MaxWait)
		err := l.Wait(ctx)
		cancel()
		if err != nil {
			if r.Context().Err() == nil {
				w.Header().Set("Retry-After", "1")
				http.Error(w, "too many requests to the admin endpoint; try again shortly", http.StatusTooManyRequests)
			}
			return
		}
		h.ServeHTTP(w, r)
	})
}

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
		if s.ln == nil {
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

// runChecks runs every check at once, each bounded by CheckTimeout.
func (s *Server) runChecks(ctx context.Context) (readiness, error) {
	res := readiness{Ready: true, Checks: make(map[string]string, len(s.cfg.Checks))}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for n, check := range s.cfg.Checks {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, s.cfg.CheckTimeout)
			defer cancel()
			err := check(ctx)
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
	return res, nil
}

// readyz answers 200 when every check passes, 503 otherwise, with each
// check's result: its error for a loopback client, "not ready" for others.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	res, err := s.ready.Get(r.Context())
	if err != nil { // the client went away
		return
	}
	if !isLoopbackClient(r) {
		res = redacted(res)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !res.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(res)
}

// redacted is res without the checks' error text.
func redacted(res readiness) readiness {
	out := readiness{Ready: res.Ready, Checks: make(map[string]string, len(res.Checks))}
	for n, v := range res.Checks {
		if v != "ok" {
			v = notReady
		}
		out.Checks[n] = v
	}
	return out
}

// isLoopbackClient reports whether r came from this host.
func isLoopbackClient(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Package statuspage serves a small HTML page for operators: the outbox's
// counts by status, the age of the oldest unsent message, throughput over
// the last minutes as a chart, blocked aggregates, the dead letters grouped
// by cause and one by one with their reasons, and the relay mode: in cursor
// mode the cursor's position, when it was saved, its leader and its lag. It
// is read-only unless a token is configured; replay and discard, of one
// dead letter or of a whole group, then need that token. Mount it on the relay's admin server, which
// binds to loopback by default; when it is bound elsewhere, set
// RequireTokenToView so that the page needs the token too.
package statuspage

import (
	"context"
	"crypto/subtle"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/ops"
)

// Config configures a Page.
type Config struct {
	// Ops reads and changes the outbox. Required.
	Ops *ops.Ops
	// Token enables the replay and discard actions; they must present it
	// (form field "token" or "Authorization: Bearer <token>"). Defaults to
	// empty: the page is read-only.
	Token string
	// RequireTokenToView makes viewing need the token as well (?token=...
	// or the Authorization header). Set it when the page is reachable from
	// other hosts. Defaults to false.
	RequireTokenToView bool
	// SampleEvery is how often the throughput is sampled for the chart.
	// Defaults to 10s.
	SampleEvery time.Duration
	// History is how far back the chart goes. Defaults to 15m.
	History time.Duration
	// DeadLetters is how many dead letters the page lists. Defaults to 50.
	DeadLetters int
	// Groups is how many groups of dead letters (by cause) the page
	// lists, the largest first. Defaults to 20.
	Groups int
	// Actor names who acts in the audit log. Defaults to "status-page".
	Actor string
	// Logger. Defaults to slog.Default().
	Logger *slog.Logger
}

// ErrConfig is wrapped by New's errors.
var ErrConfig = errors.New("statuspage: invalid config")

// Page is an http.Handler; run Sample in the background for the chart.
type Page struct {
	cfg Config
	mux *http.ServeMux

	mu      sync.Mutex
	samples []sample
}

type sample struct {
	At      time.Time
	PerMin  int64
	Pending int64
}

//go:embed page.html.tmpl
var pageHTML string

var pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"ago": func(d time.Duration) string { return d.Round(time.Second).String() },
	// since is how long before now t was, to the millisecond.
	"since": func(now, t time.Time) string { return max(now.Sub(t), 0).Round(time.Millisecond).String() },
}).Parse(pageHTML))

// New validates cfg and builds the page.
func New(cfg Config) (*Page, error) {
	if cfg.Ops == nil {
		return nil, fmt.Errorf("%w: Ops is required", ErrConfig)
	}
	if cfg.RequireTokenToView && cfg.Token == "" {
		return nil, fmt.Errorf("%w: RequireTokenToView needs a Token", ErrConfig)
	}
	if cfg.SampleEvery == 0 {
		cfg.SampleEvery = 10 * time.Second
	}
	if cfg.History == 0 {
		cfg.History = 15 * time.Minute
	}
	if cfg.DeadLetters == 0 {
		cfg.DeadLetters = 50
	}
	if cfg.Groups == 0 {
		cfg.Groups = 20
	}
	if cfg.Actor == "" {
		cfg.Actor = "status-page"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	p := &Page{cfg: cfg, mux: http.NewServeMux()}
	p.mux.HandleFunc("GET /{$}", p.view)
	p.mux.HandleFunc("POST /dlq/{id}/{action}", p.act)
	p.mux.HandleFunc("POST /dlq-groups/{key}/{action}", p.actGroup)
	return p, nil
}

func (p *Page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'")
	p.mux.ServeHTTP(w, r)
}

// Sample records the throughput every SampleEvery until ctx is done.
func (p *Page) Sample(ctx context.Context) {
	t := time.NewTicker(p.cfg.SampleEvery)
	defer t.Stop()
	for {
		p.sampleOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *Page) sampleOnce(ctx context.Context) {
	s, err := p.cfg.Ops.Stats(ctx)
	if err != nil {
		p.cfg.Logger.Warn("status page: stats", slog.Any("error", err))
		return
	}
	p.record(s)
}

func (p *Page) record(s ops.Stats) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.samples = append(p.samples, sample{At: s.At, PerMin: s.SentLastMinute,
		Pending: s.Counts[outbox.StatusPending] + s.Counts[outbox.StatusFailed] + s.Counts[outbox.StatusInFlight]})
	cutoff := s.At.Add(-p.cfg.History)
	for len(p.samples) > 0 && p.samples[0].At.Before(cutoff) {
		p.samples = p.samples[1:]
	}
}

func (p *Page) authorized(r *http.Request) bool {
	if p.cfg.Token == "" {
		return false
	}
	got := r.FormValue("token")
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		got = strings.TrimPrefix(h, "Bearer ")
	}
	return subtle.ConstantTimeCompare([]byte(got), []byte(p.cfg.Token)) == 1
}

type viewData struct {
	Stats       ops.Stats
	Statuses    []statusCount
	DeadLetters []ops.DeadLetter
	Groups      []ops.DeadLetterGroup
	Chart       chart
	Actions     bool
	Token       string
	Message     string
	Error       string
}

type statusCount struct {
	Status outbox.Status
	N      int64
}

func (p *Page) view(w http.ResponseWriter, r *http.Request) {
	if p.cfg.RequireTokenToView && !p.authorized(r) {
		http.Error(w, "a token is required (?token=...)", http.StatusUnauthorized)
		return
	}
	s, err := p.cfg.Ops.Stats(r.Context())
	if err != nil {
		http.Error(w, "cannot read the outbox: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	p.record(s)
	dls, err := p.cfg.Ops.DeadLetters(r.Context(), ops.Filter{Limit: p.cfg.DeadLetters})
	if err != nil {
		http.Error(w, "cannot read the dead letters: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	groups, err := p.cfg.Ops.DeadLetterGroups(r.Context(), ops.Filter{Limit: p.cfg.Groups})
	if err != nil {
		http.Error(w, "cannot read the dead letters: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	d := viewData{Stats: s, DeadLetters: dls, Groups: groups, Message: r.URL.Query().Get("done"), Error: r.URL.Query().Get("error")}
	for _, st := range ops.Statuses {
		d.Statuses = append(d.Statuses, statusCount{st, s.Counts[st]})
	}
	if p.authorized(r) {
		d.Actions, d.Token = true, p.cfg.Token
	}
	p.mu.Lock()
	d.Chart = newChart(p.samples)
	p.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := pageTmpl.Execute(w, d); err != nil {
		p.cfg.Logger.Warn("status page: render", slog.Any("error", err))
	}
}

func (p *Page) act(w http.ResponseWriter, r *http.Request) {
	if !p.authorized(r) {
		http.Error(w, "replay and discard need the status page's token", http.StatusForbidden)
		return
	}
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		http.Error(w, "bad message id", http.StatusBadRequest)
		return
	}
	req := ops.Request{Actor: p.cfg.Actor, Reason: r.FormValue("reason"), IDs: []uuid.UUID{id}}
	var res ops.Result
	switch r.PathValue("action") {
	case "replay":
		res, err = p.cfg.Ops.Replay(r.Context(), req)
	case "discard":
		res, err = p.cfg.Ops.Discard(r.Context(), req)
	default:
		http.Error(w, "unknown action", http.StatusNotFound)
		return
	}
	if err == nil {
		p.cfg.Logger.Info("status page action", slog.String("action", r.PathValue("action")), slog.String("message_id", id.String()),
			slog.Int64("audit_id", res.AuditID))
	}
	p.back(w, r, r.PathValue("action")+" "+id.String(), err)
}

// groupKeyRe is the form of a group's key (ops.DeadLetterGroup.Key).
var groupKeyRe = regexp.MustCompile(`^[0-9a-f]{8}$`)

// actGroup replays or discards a whole group of dead letters, in the
// batches and at the rate of ops' defaults. It goes on if the browser
// leaves, so that a large group is not stopped half way.
func (p *Page) actGroup(w http.ResponseWriter, r *http.Request) {
	if !p.authorized(r) {
		http.Error(w, "replay and discard need the status page's token", http.StatusForbidden)
		return
	}
	key := r.PathValue("key")
	if !groupKeyRe.MatchString(key) {
		http.Error(w, "bad group key", http.StatusBadRequest)
		return
	}
	req := ops.Request{Actor: p.cfg.Actor, Reason: r.FormValue("reason"), Filter: &ops.Filter{Group: key}}
	ctx := context.WithoutCancel(r.Context())
	var res ops.Result
	var err error
	switch r.PathValue("action") {
	case "replay":
		res, err = p.cfg.Ops.Replay(ctx, req)
	case "discard":
		res, err = p.cfg.Ops.Discard(ctx, req)
	default:
		http.Error(w, "unknown action", http.StatusNotFound)
		return
	}
	p.cfg.Logger.Info("status page group action", slog.String("action", r.PathValue("action")), slog.String("group", key),
		slog.Int("messages", len(res.IDs)), slog.Any("audit_ids", res.AuditIDs), slog.Any("error", err))
	p.back(w, r, fmt.Sprintf("%s group %s: %d message(s)", r.PathValue("action"), key, len(res.IDs)), err)
}

// back sends the browser back to the page after an action, which shows
// what was done, or the error.
func (p *Page) back(w http.ResponseWriter, r *http.Request, done string, err error) {
	back := "/?token=" + template.URLQueryEscaper(p.cfg.Token)
	if err != nil {
		http.Redirect(w, r, back+"&error="+template.URLQueryEscaper(err.Error()), http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, back+"&done="+template.URLQueryEscaper(done), http.StatusSeeOther)
}

// chart is the throughput history as an SVG polyline.
type chart struct {
	Points  string
	Max     int64
	Samples int
	Span    string
}

func newChart(samples []sample) chart {
	const w, h = 600.0, 120.0
	c := chart{Samples: len(samples)}
	if len(samples) == 0 {
		return c
	}
	for _, s := range samples {
		c.Max = max(c.Max, s.PerMin)
	}
	first, last := samples[0].At, samples[len(samples)-1].At
	span := last.Sub(first)
	c.Span = span.Round(time.Second).String()
	var b strings.Builder
	for i, s := range samples {
		x := w
		if span > 0 {
			x = w * float64(s.At.Sub(first)) / float64(span)
		}
		y := h
		if c.Max > 0 {
			y = h - h*float64(s.PerMin)/float64(c.Max)
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.1f,%.1f", x, y)
	}
	c.Points = b.String()
	return c
}

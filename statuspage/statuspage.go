// Package statuspage serves a small HTML page for operators: the outbox's
// counts by status, the age of the oldest unsent message, throughput over
// the last minutes as a chart, blocked aggregates, the topics the relays
// publish to, the dead letters grouped by cause and one by one with their
// reasons, and the relay mode: in cursor mode the cursor's position, when it
// was saved, its leader and its lag. It is read-only unless a token is
// configured; replay and discard, of one dead letter or of a whole group,
// then need that token. Mount it on the relay's admin server, which
// binds to loopback by default; when it is bound elsewhere, set
// RequireTokenToView so that the page needs the token too.
//
//	o, err := ops.New(pool, ops.Config{Schema: "outbox"})
//	...
//	page, err := statuspage.New(statuspage.Config{
//		Ops:   o,
//		Token: os.Getenv("OUTBOX_STATUS_TOKEN"), // empty: read-only
//	})
//	...
//	go page.Sample(ctx)   // the throughput chart, until ctx ends
//	srv.Handle("/", page) // srv: an *admin.Server
//
// # The token
//
// A request presents the token in a header, "Authorization: Bearer <token>"
// or "X-Outbox-Token: <token>", or in the form field "token" of a POST: a
// browser opens the page by posting the token from the form the page shows
// when it needs one, and each replay or discard form carries it on. The
// token is never taken from, nor put into, a URL, so it appears in no
// browser history, proxy log or Referer header. A request that presents a
// header is judged before its body is read, and a body is read only up to
// MaxFormBytes. The page is rendered in the answer to a replay or discard
// rather than by a redirect.
//
// # Cost
//
// A view reads the outbox (the statistics, which Config.Stats can share
// with other readers, and the dead letters), which takes tens of
// milliseconds of database time on a large backlog. The groups of dead
// letters, whose reading classifies every dead letter, are read at most
// once per Config.GroupsEvery and shared by the views meanwhile; the page
// answering a replay or discard reads them afresh. The page serves at
// most Config.MaxViewRate views per second; a view beyond the rate waits
// its turn, up to 5s, and then gets 429 Too Many Requests, so that no
// number of clients reloading the page can take the database's time from
// the relay.
//
// # Group actions
//
// A replay or discard of a group goes on if the browser leaves, so that a
// large group is not stopped half way. The page runs one at a time: a
// second one, of any group, gets 409 Conflict while the first runs.
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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"golang.org/x/time/rate"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/memo"
	"github.com/outbox-dev/outbox/ops"
)

// Config configures a Page.
type Config struct {
	// Ops reads and changes the outbox. Required.
	Ops *ops.Ops
	// Stats reads the snapshot the page shows and samples. Defaults to
	// Ops.Stats; pass an ops.StatsCache's Stats to share one snapshot with
	// the metrics and other readers.
	Stats func(context.Context) (ops.Stats, error)
	// Token enables the replay and discard actions; they must present it
	// (see the package documentation: a header or a form field, never the
	// URL). Defaults to empty: the page is read-only.
	Token string
	// RequireTokenToView makes viewing need the token as well; the page
	// then shows a form that asks for it. Set it when the page is
	// reachable from other hosts. Defaults to false.
	RequireTokenToView bool
	// SampleEvery is how often the throughput is sampled for the chart.
	// Defaults to 10s.
	SampleEvery time.Duration
	// History is how far back the chart goes. Defaults to 15m.
	History time.Duration
	// DeadLetters is how many dead letters the page lists. Defaults to 50.
	DeadLetters int
	// MaxViewRate bounds the views, replays and discards served per
	// second, in bursts of up to three. Defaults to 2.
	MaxViewRate float64
	// Groups is how many groups of dead letters (by cause) the page
	// lists, the largest first. Defaults to 20.
	Groups int
	// GroupsEvery is how long the page shows the groups it read before it
	// reads them again: views meanwhile share them. Defaults to 5s.
	GroupsEvery time.Duration
	// Actor names who acts in the audit log. Defaults to "status-page".
	Actor string
	// Logger. Defaults to slog.Default().
	Logger *slog.Logger
}

// ErrConfig is wrapped by New's errors.
var ErrConfig = errors.New("statuspage: invalid config")

// MaxFormBytes is the largest request body the page reads: a form with the
// token and a discard reason. A larger one is refused with 413.
const MaxFormBytes = 8 << 10

// Page is an http.Handler; run Sample in the background for the chart.
type Page struct {
	cfg Config
	mux *http.ServeMux

	views *rate.Limiter

	// groups are the groups of dead letters the views show.
	groups *memo.Value[groupsRead]

	mu      sync.Mutex
	samples []sample
	failing atomic.Bool // the last sample failed
	// groupAction names the group replay or discard that runs; "" when
	// none does.
	groupAction string
}

// groupsRead is a read of the groups of dead letters.
type groupsRead struct {
	groups []ops.DeadLetterGroup
	at     time.Time
}

// maxViewWait is the longest a view waits for its turn under MaxViewRate.
const maxViewWait = 5 * time.Second

// groupsReadTimeout bounds a read of the groups shared by views.
const groupsReadTimeout = 30 * time.Second

type sample struct {
	At      time.Time
	PerMin  int64
	Pending int64
}

//go:embed page.html.tmpl
var pageHTML string

var tokenFormTmpl = template.Must(template.New("token").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>outbox status</title></head>
<body style="font: 14px system-ui, sans-serif; margin: 2em">
<h1 style="font-size: 1.4em">outbox status</h1>
<p>{{.}}</p>
<form method="post" action="/"><label>Token <input type="password" name="token" autocomplete="current-password" required autofocus></label>
<button type="submit">Open</button></form>
</body></html>
`))

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
	if cfg.Actor == "" {
		cfg.Actor = "status-page"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Stats == nil {
		cfg.Stats = cfg.Ops.Stats
	}
	if cfg.MaxViewRate == 0 {
		cfg.MaxViewRate = 2
	}
	if cfg.Groups == 0 {
		cfg.Groups = 20
	}
	if cfg.GroupsEvery == 0 {
		cfg.GroupsEvery = 5 * time.Second
	}
	p := &Page{cfg: cfg, mux: http.NewServeMux(), views: rate.NewLimiter(rate.Limit(cfg.MaxViewRate), 3)}
	p.groups = memo.New(p.readGroups, cfg.GroupsEvery, groupsReadTimeout)
	p.mux.HandleFunc("GET /{$}", p.view)
	p.mux.HandleFunc("POST /{$}", p.view) // the token from the page's token form
	p.mux.HandleFunc("POST /dlq/{id}/{action}", p.act)
	p.mux.HandleFunc("POST /dlq-groups/{key}/{action}", p.actGroup)
	return p, nil
}

func (p *Page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'")
	r.Body = http.MaxBytesReader(w, r.Body, MaxFormBytes)
	ctx, cancel := context.WithTimeout(r.Context(), maxViewWait)
	err := p.views.Wait(ctx)
	cancel()
	if err != nil {
		if r.Context().Err() == nil {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "the status page is busy; try again shortly", http.StatusTooManyRequests)
		}
		return
	}
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

// sampleOnce records one sample. A failure is logged when sampling starts
// to fail, not at every sample while it keeps failing.
func (p *Page) sampleOnce(ctx context.Context) {
	s, err := p.cfg.Stats(ctx)
	if err != nil {
		if !p.failing.Swap(true) && ctx.Err() == nil {
			p.cfg.Logger.Warn("status page: cannot read the outbox's stats; the chart has a gap until it can", slog.Any("error", err))
		}
		return
	}
	if p.failing.Swap(false) {
		p.cfg.Logger.Info("status page: reading the outbox's stats again")
	}
	p.record(s)
}

// record adds s to the chart, unless it is a snapshot already recorded
// (readers share snapshots).
func (p *Page) record(s ops.Stats) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.samples); n > 0 && !s.At.After(p.samples[n-1].At) {
		return
	}
	p.samples = append(p.samples, sample{At: s.At, PerMin: s.SentLastMinute,
		Pending: s.Counts[outbox.StatusPending] + s.Counts[outbox.StatusFailed] + s.Counts[outbox.StatusInFlight]})
	cutoff := s.At.Add(-p.cfg.History)
	for len(p.samples) > 0 && p.samples[0].At.Before(cutoff) {
		p.samples = p.samples[1:]
	}
}

// errBodyTooLarge is authorized's error for a body over MaxFormBytes.
var errBodyTooLarge = fmt.Errorf("the request body is larger than %d bytes", MaxFormBytes)

// authorized reports whether r presents the token: in a header, judged
// without reading the body, or else in the form field "token" of a POST
// body of at most MaxFormBytes. Never from the URL.
func (p *Page) authorized(r *http.Request) (bool, error) {
	if p.cfg.Token == "" {
		return false, nil
	}
	if got, ok := headerToken(r); ok {
		return p.matches(got), nil
	}
	if r.Method != http.MethodPost {
		return false, nil
	}
	if err := parseForm(r); err != nil {
		return false, err
	}
	return p.matches(r.PostForm.Get("token")), nil
}

// parseForm reads r's form body (ServeHTTP bounds it to MaxFormBytes).
func parseForm(r *http.Request) error {
	err := r.ParseForm()
	if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
		return errBodyTooLarge
	}
	return err
}

// headerToken is the token of an Authorization: Bearer or X-Outbox-Token
// header, if r has one.
func headerToken(r *http.Request) (string, bool) {
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		return strings.TrimPrefix(h, "Bearer "), true
	}
	if h := r.Header.Get("X-Outbox-Token"); h != "" {
		return h, true
	}
	return "", false
}

func (p *Page) matches(got string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(p.cfg.Token)) == 1
}

// refuse answers a request that did not present the token.
func (p *Page) refuse(w http.ResponseWriter, err error, status int, msg string) {
	switch {
	case errors.Is(err, errBodyTooLarge):
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
	case err != nil:
		http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
	case status == http.StatusUnauthorized:
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		_ = tokenFormTmpl.Execute(w, msg)
	default:
		http.Error(w, msg, status)
	}
}

type viewData struct {
	Stats       ops.Stats
	Statuses    []statusCount
	DeadLetters []ops.DeadLetter
	Groups      []ops.DeadLetterGroup
	// GroupsAt is when the groups were read; GroupsEvery how often.
	GroupsAt    time.Time
	GroupsEvery time.Duration
	Chart       chart
	Actions     bool
	Token       string
	// AskToken offers the token form on a read-only page: a token is
	// configured but the request did not present it.
	AskToken bool
	Message  string
	Error    string
}

type statusCount struct {
	Status outbox.Status
	N      int64
}

// banner is the outcome of an action, shown at the top of the page.
type banner struct{ done, err string }

func (p *Page) view(w http.ResponseWriter, r *http.Request) {
	auth, err := p.authorized(r)
	if err != nil || (!auth && (p.cfg.RequireTokenToView || r.Method == http.MethodPost)) {
		p.refuse(w, err, http.StatusUnauthorized, "This page needs the status page's token.")
		return
	}
	p.render(w, r, http.StatusOK, false, banner{}, auth)
}

// readGroups reads the groups of dead letters the page lists.
func (p *Page) readGroups(ctx context.Context) (groupsRead, error) {
	groups, err := p.cfg.Ops.DeadLetterGroups(ctx, ops.Filter{Limit: p.cfg.Groups})
	return groupsRead{groups: groups, at: time.Now()}, err
}

// render writes the page with the outcome of an action, and the actions
// if auth. It shows the statistics and groups the views share, or, if
// fresh (after an action), reads them afresh.
func (p *Page) render(w http.ResponseWriter, r *http.Request, status int, fresh bool, b banner, auth bool) {
	stats, groups := p.cfg.Stats, p.groups.Get
	if fresh {
		stats, groups = p.cfg.Ops.Stats, p.readGroups
	}
	s, err := stats(r.Context())
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
	g, err := groups(r.Context())
	if err != nil {
		http.Error(w, "cannot read the dead letters: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	d := viewData{Stats: s, DeadLetters: dls, Groups: g.groups, GroupsAt: g.at, GroupsEvery: p.cfg.GroupsEvery,
		Message: b.done, Error: b.err}
	for _, st := range ops.Statuses {
		d.Statuses = append(d.Statuses, statusCount{st, s.Counts[st]})
	}
	if auth {
		d.Actions, d.Token = true, p.cfg.Token
	}
	d.AskToken = !auth && p.cfg.Token != ""
	p.mu.Lock()
	d.Chart = newChart(p.samples)
	p.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if err := pageTmpl.Execute(w, d); err != nil {
		p.cfg.Logger.Warn("status page: render", slog.Any("error", err))
	}
}

// act replays or discards a dead letter and answers with the page, read
// afresh, showing the outcome.
func (p *Page) act(w http.ResponseWriter, r *http.Request) {
	if !p.admitAction(w, r) {
		return
	}
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		http.Error(w, "bad message id", http.StatusBadRequest)
		return
	}
	req := ops.Request{Actor: p.cfg.Actor, Reason: r.PostForm.Get("reason"), IDs: []uuid.UUID{id}}
	p.runAction(r.Context(), w, r, req, id.String())
}

// actGroup replays or discards a whole group of dead letters, in the
// batches and at the rate of ops' defaults, and answers with the page. It
// goes on if the browser leaves, so that a large group is not stopped half
// way. One runs at a time: while one runs, another gets 409 Conflict.
func (p *Page) actGroup(w http.ResponseWriter, r *http.Request) {
	if !p.admitAction(w, r) {
		return
	}
	key := r.PathValue("key")
	if !ops.ValidGroupKey(key) {
		http.Error(w, "bad group key: want the 16 hex digits of a group's key", http.StatusBadRequest)
		return
	}
	what := r.PathValue("action") + " of group " + key
	if running, ok := p.startGroupAction(what); !ok {
		p.render(w, r, http.StatusConflict, false, banner{err: fmt.Sprintf(
			"not started: the %s is still running, and the page changes one group at a time; try again when it is done", running)}, true)
		return
	}
	defer p.endGroupAction()
	req := ops.Request{Actor: p.cfg.Actor, Reason: r.PostForm.Get("reason"), Filter: &ops.Filter{Group: key}}
	p.runAction(context.WithoutCancel(r.Context()), w, r, req, "group "+key)
}

// startGroupAction records that the group action what runs, unless one
// runs already: it then returns what that one is and false.
func (p *Page) startGroupAction(what string) (running string, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.groupAction != "" {
		return p.groupAction, false
	}
	p.groupAction = what
	return "", true
}

func (p *Page) endGroupAction() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.groupAction = ""
}

// admitAction checks an action's token, then reads its form; it answers
// the request itself and returns false when either fails.
func (p *Page) admitAction(w http.ResponseWriter, r *http.Request) bool {
	if auth, err := p.authorized(r); err != nil || !auth {
		p.refuse(w, err, http.StatusForbidden, "replay and discard need the status page's token")
		return false
	}
	if err := parseForm(r); err != nil {
		p.refuse(w, err, http.StatusBadRequest, "")
		return false
	}
	return true
}

// runAction replays or discards what req selects, as the request's path
// says, and answers with the page showing the outcome; what names the
// selection in the log and on the page.
func (p *Page) runAction(ctx context.Context, w http.ResponseWriter, r *http.Request, req ops.Request, what string) {
	action := r.PathValue("action")
	var res ops.Result
	var err error
	switch action {
	case "replay":
		res, err = p.cfg.Ops.Replay(ctx, req)
	case "discard":
		res, err = p.cfg.Ops.Discard(ctx, req)
	default:
		http.Error(w, "unknown action", http.StatusNotFound)
		return
	}
	p.cfg.Logger.Info("status page action", slog.String("action", action), slog.String("of", what),
		slog.Int("messages", len(res.IDs)), slog.Any("audit_ids", res.AuditIDs), slog.Any("error", err))
	p.groups.Forget()
	if err != nil {
		p.render(w, r, actionStatus(err), true, banner{err: err.Error()}, true)
		return
	}
	p.render(w, r, http.StatusOK, true, banner{done: fmt.Sprintf("%s %s: %d message(s)", action, what, len(res.IDs))}, true)
}

// actionStatus is the HTTP status of a failed replay or discard.
func actionStatus(err error) int {
	switch {
	case errors.Is(err, ops.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, ops.ErrNotDeadLetter):
		return http.StatusConflict
	case errors.Is(err, ops.ErrReasonRequired):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
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

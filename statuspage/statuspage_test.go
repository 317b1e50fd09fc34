package statuspage_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/ops"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/statuspage"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

const reason = "MESSAGE_TOO_LARGE: the broker refused a 2 MB record"

// seed makes one dead letter (with one message waiting behind it) and
// returns the page's Ops and the dead letter's id.
func seed(t *testing.T) (*ops.Ops, uuid.UUID) {
	t.Helper()
	e := seedEnv(t)
	return e.ops, e.dead
}

// env is a seeded outbox: its Ops, pool and store, and the dead letter.
type env struct {
	ops   *ops.Ops
	pool  *pgxpool.Pool
	store *pgstore.Store
	dead  uuid.UUID
}

// seedEnv is seed, with the pool and store.
func seedEnv(t *testing.T) env {
	t.Helper()
	pool, schema, st := migrated(t)
	e := env{pool: pool, store: st}
	e.dead = e.addDeadLetter(t, "o-42", outbox.Message{AggregateType: "Order", AggregateID: "o-42", EventType: "OrderPaid", Payload: []byte(`{}`)})
	o, err := ops.New(pool, ops.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	e.ops = o
	return e
}

// addDeadLetter enqueues an OrderPlaced of aggregate aggID and behind it
// the messages given, and dead-letters the first with reason as the relay
// would; it returns its id.
func (e env) addDeadLetter(t *testing.T, aggID string, behind ...outbox.Message) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	dead := outbox.Message{ID: uuid.Must(uuid.NewV7()), AggregateType: "Order", AggregateID: aggID, EventType: "OrderPlaced", Payload: []byte(`{}`)}
	if err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error { return e.store.Enqueue(ctx, tx, append([]outbox.Message{dead}, behind...)...) }); err != nil {
		t.Fatal(err)
	}
	c, err := e.store.Claim(ctx, store.ClaimParams{Owner: "test", Limit: 100, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var others []int64
	for _, r := range c.Records {
		if r.ID != dead.ID {
			others = append(others, r.Seq)
			continue
		}
		if _, err := e.store.MarkFailed(ctx, c.Token, []store.Failure{{Seq: r.Seq, Error: reason, CountAttempt: true, Dead: true}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.store.Release(ctx, c.Token, others); err != nil {
		t.Fatal(err)
	}
	return dead.ID
}

// migrated is a migrated outbox in the test's own schema.
func migrated(t *testing.T) (*pgxpool.Pool, string, *pgstore.Store) {
	t.Helper()
	pool, schema := pgtest.Schema(t)
	st, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return pool, schema, st
}

func serve(t *testing.T, cfg statuspage.Config) string {
	t.Helper()
	p, err := statuspage.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return srv.URL
}

// chromium returns the headless browser, failing in CI when it is missing
// (.ci/run installs it) and skipping elsewhere.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed; .ci/run installs Debian's chromium package")
	}
	t.Skip("chromium is not installed (apt-get install chromium); CI runs this test")
	return ""
}

// dumpDOM loads url in headless Chromium and returns the DOM after load.
func dumpDOM(t *testing.T, url string) string {
	t.Helper()
	bin := chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+t.TempDir(), "--dump-dom", url)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom %s: %v", url, err)
	}
	return string(out)
}

// In a real headless Chromium the page shows the counts, the seeded dead
// letter with its reason, and that its aggregate is blocked; without a
// token it offers no actions.
func TestStatusPage_ShowsSeededDeadLetterInChromium(t *testing.T) {
	t.Parallel()
	o, id := seed(t)
	base := serve(t, statuspage.Config{Ops: o})
	dom := dumpDOM(t, base+"/")
	for _, want := range []string{
		`data-id="` + id.String() + `"`,
		"MESSAGE_TOO_LARGE: the broker refused a 2 MB record",
		`data-status="DEAD_LETTER">1<`,
		`data-status="PENDING">1<`,
		`id="blocked" class="bad">1<`,
	} {
		if !strings.Contains(dom, want) {
			t.Fatalf("the page in Chromium lacks %q:\n%s", want, dom)
		}
	}
	if strings.Contains(dom, "/replay") || strings.Contains(dom, "/discard") {
		t.Fatal("a page without a token offers replay or discard")
	}
}

// Actions need the token: without it they are refused and change nothing;
// with it a replay moves the dead letter back to PENDING, recorded in the
// audit log, and the answer is the page showing the outcome, not a
// redirect.
func TestStatusPage_ActionsNeedTheToken(t *testing.T) {
	t.Parallel()
	o, id := seed(t)
	base := serve(t, statuspage.Config{Ops: o, Token: "s3cret"})
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	for _, token := range []string{"", "wrong"} {
		code, _ := post(t, client, base+"/dlq/"+id.String()+"/replay", url.Values{"token": {token}}, nil)
		if code != http.StatusForbidden {
			t.Fatalf("replay with token %q: %d; want 403", token, code)
		}
	}
	assertStatus(t, o, id, outbox.StatusDeadLetter)

	code, body := post(t, client, base+"/dlq/"+id.String()+"/replay", url.Values{"token": {"s3cret"}}, nil)
	if code != http.StatusOK || !strings.Contains(body, "Done: replay "+id.String()) {
		t.Fatalf("replay with the token: %d; want 200 with the outcome:\n%s", code, body)
	}
	d, err := o.DeadLetter(context.Background(), id)
	if err != nil || d.Record.Status != outbox.StatusPending || d.Record.Attempts != 0 {
		t.Fatalf("after replay: %v attempts %d, %v; want PENDING with attempts reset", d.Record.Status, d.Record.Attempts, err)
	}
	audit, err := o.Audit(context.Background(), 10)
	if err != nil || len(audit) == 0 || audit[0].Actor != "status-page" {
		t.Fatalf("audit after replay: %+v, %v", audit, err)
	}
	code, body = post(t, client, base+"/dlq/"+id.String()+"/replay", url.Values{"token": {"s3cret"}}, nil)
	if code != http.StatusConflict || !strings.Contains(body, "not a dead letter") {
		t.Fatalf("second replay: %d; want 409 naming the reason:\n%s", code, body)
	}
}

// The token is taken from a header or a POST form, never from the URL: a
// token in the query string does not open the page, and no answer puts the
// token into a URL (a Location header, a link, a form's action).
func TestStatusPage_TokenNeverFromNorIntoAURL(t *testing.T) {
	t.Parallel()
	o, id := seed(t)
	base := serve(t, statuspage.Config{Ops: o, Token: "s3cret", RequireTokenToView: true})
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	if code, body := get(t, base+"/?token=s3cret", nil); code != http.StatusUnauthorized || !strings.Contains(body, `name="token"`) {
		t.Fatalf("view with the token in the query string: %d; want 401 with the token form:\n%s", code, body)
	}
	if code, _ := post(t, client, base+"/dlq/"+id.String()+"/replay?token=s3cret", url.Values{}, nil); code != http.StatusForbidden {
		t.Fatalf("replay with the token in the query string: %d; want 403", code)
	}
	assertStatus(t, o, id, outbox.StatusDeadLetter)

	resp, err := client.PostForm(base+"/dlq/"+id.String()+"/replay", url.Values{"token": {"s3cret"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Location") != "" {
		t.Fatalf("replay: %d, Location %q; want 200 and no redirect", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, leak := range []string{"token=s3cret", "?token", "&token"} {
		if strings.Contains(string(b), leak) {
			t.Fatalf("the page after replay has the token in a URL (%q):\n%s", leak, b)
		}
	}
}

// A request with a wrong token in a header is refused before its body is
// read.
func TestStatusPage_WrongHeaderTokenRefusedBeforeTheBodyIsRead(t *testing.T) {
	t.Parallel()
	o, id := seed(t)
	p, err := statuspage.New(statuspage.Config{Ops: o, Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"Authorization", "X-Outbox-Token"} {
		body := &countingReader{r: strings.NewReader("token=s3cret&reason=x")}
		req := httptest.NewRequest(http.MethodPost, "/dlq/"+id.String()+"/replay", body)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set(h, map[string]string{"Authorization": "Bearer wrong", "X-Outbox-Token": "wrong"}[h])
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, req)
		if rec.Code != http.StatusForbidden || body.n != 0 {
			t.Fatalf("%s: wrong: %d after reading %d body bytes; want 403 before reading any", h, rec.Code, body.n)
		}
	}
	assertStatus(t, o, id, outbox.StatusDeadLetter)
}

// A body larger than MaxFormBytes is refused with 413, whether the token
// comes in it or in a header, and changes nothing.
func TestStatusPage_LargeBodyRefused(t *testing.T) {
	t.Parallel()
	o, id := seed(t)
	base := serve(t, statuspage.Config{Ops: o, Token: "s3cret"})
	big := url.Values{"token": {"s3cret"}, "reason": {strings.Repeat("x", statuspage.MaxFormBytes)}}
	if code, _ := post(t, http.DefaultClient, base+"/dlq/"+id.String()+"/discard", big, nil); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("discard with a large form: %d; want 413", code)
	}
	big.Del("token")
	if code, _ := post(t, http.DefaultClient, base+"/dlq/"+id.String()+"/discard", big, map[string]string{"X-Outbox-Token": "s3cret"}); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("discard with the token in a header and a large form: %d; want 413", code)
	}
	assertStatus(t, o, id, outbox.StatusDeadLetter)
}

// Bound beyond loopback the page can demand the token for viewing too: in
// an Authorization or X-Outbox-Token header, or posted from its token form.
func TestStatusPage_RequireTokenToView(t *testing.T) {
	t.Parallel()
	o, _ := seed(t)
	base := serve(t, statuspage.Config{Ops: o, Token: "s3cret", RequireTokenToView: true})
	for _, c := range []struct {
		name    string
		headers map[string]string
		want    int
	}{
		{"none", nil, http.StatusUnauthorized},
		{"wrong bearer", map[string]string{"Authorization": "Bearer nope"}, http.StatusUnauthorized},
		{"bearer", map[string]string{"Authorization": "Bearer s3cret"}, http.StatusOK},
		{"X-Outbox-Token", map[string]string{"X-Outbox-Token": "s3cret"}, http.StatusOK},
	} {
		if code, _ := get(t, base+"/", c.headers); code != c.want {
			t.Errorf("view with %s: %d; want %d", c.name, code, c.want)
		}
	}
	for token, want := range map[string]int{"nope": http.StatusUnauthorized, "s3cret": http.StatusOK} {
		code, body := post(t, http.DefaultClient, base+"/", url.Values{"token": {token}}, nil)
		if code != want {
			t.Errorf("view posting token %q: %d; want %d", token, code, want)
		}
		if want == http.StatusOK && !strings.Contains(body, "/replay") {
			t.Errorf("the page opened with the token offers no actions:\n%s", body)
		}
	}
	if _, err := statuspage.New(statuspage.Config{Ops: o, RequireTokenToView: true}); err == nil {
		t.Error("RequireTokenToView without a Token accepted")
	}
}

func get(t *testing.T, u string, headers map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	return do(t, http.DefaultClient, req)
}

func post(t *testing.T, client *http.Client, u string, form url.Values, headers map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	return do(t, client, req)
}

func do(t *testing.T, client *http.Client, req *http.Request) (int, string) {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func assertStatus(t *testing.T, o *ops.Ops, id uuid.UUID, want outbox.Status) {
	t.Helper()
	d, err := o.DeadLetter(context.Background(), id)
	if err != nil || d.Record.Status != want {
		t.Fatalf("message %s is %v (%v); want %v", id, d.Record.Status, err, want)
	}
}

// countingReader counts the bytes read from r.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// However many clients reload the page, it serves at most MaxViewRate
// views per second (plus a burst of three), each of which reads the
// outbox; the others wait and then get 429 with Retry-After.
func TestStatusPage_ServesAtMostMaxViewRate(t *testing.T) {
	t.Parallel()
	o, _ := seed(t)
	const perSecond = 5
	base := serve(t, statuspage.Config{Ops: o, MaxViewRate: perSecond})
	begin := time.Now()
	stop := begin.Add(1500 * time.Millisecond)
	var served, refused atomic.Int64
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				resp, err := http.Get(base + "/")
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					served.Add(1)
				case http.StatusTooManyRequests:
					refused.Add(1)
				}
			}
		})
	}
	wg.Wait()
	bound := int64(time.Since(begin).Seconds()*perSecond) + 3 + 1
	if n := served.Load(); n > bound || n == 0 {
		t.Fatalf("served %d views; want between 1 and %d", n, bound)
	}
}

// The page lists the topics the relays reported, one that cannot take
// records first, with its reason and fix.
func TestStatusPage_ShowsTopics(t *testing.T) {
	t.Parallel()
	o, _ := seed(t)
	err := o.ReportTopics(context.Background(), "relay-1", []sink.TopicStatus{
		{Topic: "orders", Published: 3, PublishedLastHour: 3, LastPublishedAt: time.Now()},
		{Topic: "invoices", UnavailableSince: time.Now(), Reason: "UNKNOWN_TOPIC_OR_PARTITION", Fix: "create the topic"},
	})
	if err != nil {
		t.Fatal(err)
	}
	code, page := get(t, serve(t, statuspage.Config{Ops: o})+"/", nil)
	if code != http.StatusOK {
		t.Fatalf("GET / = %d:\n%s", code, page)
	}
	for _, want := range []string{`data-topic="invoices"`, "cannot take records since", "UNKNOWN_TOPIC_OR_PARTITION", "create the topic",
		`data-topic="orders"`} {
		if !strings.Contains(page, want) {
			t.Fatalf("the page lacks %q:\n%s", want, page)
		}
	}
	if strings.Index(page, `data-topic="invoices"`) > strings.Index(page, `data-topic="orders"`) {
		t.Error("the unavailable topic is not listed first")
	}
}

// The page lists the dead letters grouped by cause, with the group's
// actions only for the token; a group's replay needs the token and then
// replays the whole group, recorded in the audit log.
func TestStatusPage_GroupActionsNeedTheTokenAndChangeTheGroup(t *testing.T) {
	t.Parallel()
	o, id := seed(t)
	groups, err := o.DeadLetterGroups(context.Background(), ops.Filter{})
	if err != nil || len(groups) != 1 {
		t.Fatalf("groups = %+v, %v; want the seeded dead letter's", groups, err)
	}
	key := groups[0].Key
	base := serve(t, statuspage.Config{Ops: o, Token: "s3cret"})

	for token, actions := range map[string]bool{"": false, "s3cret": true} {
		headers := map[string]string{}
		if token != "" {
			headers["Authorization"] = "Bearer " + token
		}
		code, page := get(t, base+"/", headers)
		if code != http.StatusOK || !strings.Contains(page, `data-group="`+key+`"`) || !strings.Contains(page, "MESSAGE_TOO_LARGE") {
			t.Fatalf("GET / = %d; the page lacks the group %s:\n%s", code, key, page)
		}
		if got := strings.Contains(page, "/dlq-groups/"+key+"/replay"); got != actions {
			t.Errorf("token %q: the page offers the group's replay: %v, want %v", token, got, actions)
		}
	}

	replay := func(token string) (int, string) {
		return post(t, http.DefaultClient, base+"/dlq-groups/"+key+"/replay", url.Values{"token": {token}, "reason": {"limit raised"}}, nil)
	}
	if code, _ := replay("wrong"); code != http.StatusForbidden {
		t.Fatalf("group replay with a wrong token: %d; want 403", code)
	}
	assertStatus(t, o, id, outbox.StatusDeadLetter)
	if code, page := replay("s3cret"); code != http.StatusOK || !strings.Contains(page, "replay group "+key+": 1 message") {
		t.Fatalf("group replay with the token: %d\n%s", code, page)
	}
	assertStatus(t, o, id, outbox.StatusPending)
	audit, err := o.Audit(context.Background(), 10)
	if err != nil || len(audit) != 1 || audit[0].Actor != "status-page" || audit[0].Reason != "limit raised" ||
		!strings.Contains(string(audit[0].Filter), key) {
		t.Fatalf("audit after the group replay: %+v, %v", audit, err)
	}
}

// The views share the groups of dead letters they read for GroupsEvery:
// a dead letter added meanwhile shows only after it, or after an action,
// whose answer reads the groups afresh, as do the views after it.
func TestStatusPage_ViewsShareTheGroupsUntilAnAction(t *testing.T) {
	t.Parallel()
	e := seedEnv(t)
	base := serve(t, statuspage.Config{Ops: e.ops, Token: "s3cret", GroupsEvery: time.Hour})
	auth := map[string]string{"Authorization": "Bearer s3cret"}
	replayButton := func(page string) string {
		i := strings.Index(page, `data-group="`)
		j := strings.Index(page[max(i, 0):], "</tr>")
		if i < 0 || j < 0 {
			t.Fatalf("the page lists no group:\n%s", page)
		}
		return page[i : i+j]
	}
	if _, page := get(t, base+"/", auth); !strings.Contains(replayButton(page), "Replay 1<") {
		t.Fatalf("the group's row before: %s; want 1 dead letter", replayButton(page))
	}
	e.addDeadLetter(t, "o-43")
	if _, page := get(t, base+"/", auth); !strings.Contains(replayButton(page), "Replay 1<") {
		t.Fatalf("a view within GroupsEvery read the groups again: %s", replayButton(page))
	}
	// An action (here of a group that has no dead letters) answers with
	// the groups read afresh, and the views after it read them again.
	code, page := post(t, http.DefaultClient, base+"/dlq-groups/0123456789abcdef/replay", url.Values{"token": {"s3cret"}}, nil)
	if code != http.StatusOK || !strings.Contains(replayButton(page), "Replay 2<") {
		t.Fatalf("the answer to an action: %d, the group's row %s; want 2 dead letters", code, replayButton(page))
	}
	if _, page := get(t, base+"/", auth); !strings.Contains(replayButton(page), "Replay 2<") {
		t.Fatalf("a view after the action shows %s; want 2 dead letters", replayButton(page))
	}
}

// The page runs one group replay or discard at a time: while one runs
// (held up here by a transaction that locks the group's dead letter),
// another of the same or any other group gets 409 and changes nothing;
// once the first is done, the next is accepted.
func TestStatusPage_OneGroupActionAtATime(t *testing.T) {
	t.Parallel()
	e := seedEnv(t)
	groups, err := e.ops.DeadLetterGroups(context.Background(), ops.Filter{})
	if err != nil || len(groups) != 1 {
		t.Fatalf("groups = %+v, %v", groups, err)
	}
	key := groups[0].Key
	base := serve(t, statuspage.Config{Ops: e.ops, Token: "s3cret"})
	form := url.Values{"token": {"s3cret"}, "reason": {"broker fixed"}}

	ctx := context.Background()
	lock, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx)
	if _, err := lock.Exec(ctx, "SELECT 1 FROM outbox_messages WHERE id = $1 FOR UPDATE", e.dead); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		code int
		body string
		err  error
	}
	first := make(chan answer, 1)
	go func() {
		resp, err := http.PostForm(base+"/dlq-groups/"+key+"/replay", form)
		if err != nil {
			first <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		first <- answer{resp.StatusCode, string(b), err}
	}()
	waitBlocked(t, e.pool)

	impatient := &http.Client{Timeout: 10 * time.Second} // a second run would wait for the lock too
	for _, other := range []string{key + "/discard", key + "/replay", "0123456789abcdef/replay"} {
		code, body := post(t, impatient, base+"/dlq-groups/"+other, form, nil)
		if code != http.StatusConflict || !strings.Contains(body, "replay of group "+key+" is still running") {
			t.Fatalf("%s while the replay of group %s runs: %d; want 409 naming it:\n%s", other, key, code, body)
		}
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if a := <-first; a.err != nil || a.code != http.StatusOK || !strings.Contains(a.body, "replay group "+key+": 1 message") {
		t.Fatalf("the first replay: %d, %v\n%s", a.code, a.err, a.body)
	}
	if audit, err := e.ops.Audit(ctx, 10); err != nil || len(audit) != 1 {
		t.Fatalf("audit: %+v, %v; want the first replay's entry only", audit, err)
	}
	if code, body := post(t, http.DefaultClient, base+"/dlq-groups/"+key+"/discard", form, nil); code != http.StatusOK {
		t.Fatalf("a discard after the replay ended: %d; want it accepted:\n%s", code, body)
	}
}

// waitBlocked waits until a statement of the test's schema waits for a
// lock.
func waitBlocked(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%' || current_schema() || '%'`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no statement waited for the lock within 20s")
}

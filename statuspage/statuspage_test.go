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

// seed makes one dead letter (with one message waiting behind it) and one
// sent message, and returns the page's Ops and the dead letter's id.
func seed(t *testing.T) (*ops.Ops, uuid.UUID) {
	t.Helper()
	pool, schema, st := migrated(t)
	ctx := context.Background()
	dead := outbox.Message{ID: uuid.Must(uuid.NewV7()), AggregateType: "Order", AggregateID: "o-42", EventType: "OrderPlaced", Payload: []byte(`{}`)}
	behind := outbox.Message{AggregateType: "Order", AggregateID: "o-42", EventType: "OrderPaid", Payload: []byte(`{}`)}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return st.Enqueue(ctx, tx, dead, behind) }); err != nil {
		t.Fatal(err)
	}
	c, err := st.Claim(ctx, store.ClaimParams{Owner: "test", Limit: 10, Lease: time.Minute})
	if err != nil || len(c.Records) != 1 {
		t.Fatalf("claim: %v, %d records", err, len(c.Records))
	}
	if _, err := st.MarkFailed(ctx, c.Token, []store.Failure{{Seq: c.Records[0].Seq, Error: reason, CountAttempt: true, Dead: true}}); err != nil {
		t.Fatal(err)
	}
	o, err := ops.New(pool, ops.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	return o, dead.ID
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

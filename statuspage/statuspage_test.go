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
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/ops"
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
// audit log.
func TestStatusPage_ActionsNeedTheToken(t *testing.T) {
	t.Parallel()
	o, id := seed(t)
	base := serve(t, statuspage.Config{Ops: o, Token: "s3cret"})
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	resp, err := client.PostForm(base+"/dlq/"+id.String()+"/replay", url.Values{"token": {"wrong"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("replay with a wrong token: %d; want 403", resp.StatusCode)
	}
	d, err := o.DeadLetter(context.Background(), id)
	if err != nil || d.Record.Status != outbox.StatusDeadLetter {
		t.Fatalf("after a refused replay: %v, %v; want still DEAD_LETTER", d.Record.Status, err)
	}

	resp, err = client.PostForm(base+"/dlq/"+id.String()+"/replay", url.Values{"token": {"s3cret"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || strings.Contains(resp.Header.Get("Location"), "error=") {
		t.Fatalf("replay with the token: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	d, err = o.DeadLetter(context.Background(), id)
	if err != nil || d.Record.Status != outbox.StatusPending || d.Record.Attempts != 0 {
		t.Fatalf("after replay: %v attempts %d, %v; want PENDING with attempts reset", d.Record.Status, d.Record.Attempts, err)
	}
	audit, err := o.Audit(context.Background(), 10)
	if err != nil || len(audit) == 0 || audit[0].Actor != "status-page" {
		t.Fatalf("audit after replay: %+v, %v", audit, err)
	}
}

// Bound beyond loopback the page can demand the token for viewing too.
func TestStatusPage_RequireTokenToView(t *testing.T) {
	t.Parallel()
	o, _ := seed(t)
	base := serve(t, statuspage.Config{Ops: o, Token: "s3cret", RequireTokenToView: true})
	for token, want := range map[string]int{"": http.StatusUnauthorized, "nope": http.StatusUnauthorized, "s3cret": http.StatusOK} {
		resp, err := http.Get(base + "/?token=" + token)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("view with token %q: %d; want %d", token, resp.StatusCode, want)
		}
	}
	if _, err := statuspage.New(statuspage.Config{Ops: o, RequireTokenToView: true}); err == nil {
		t.Error("RequireTokenToView without a Token accepted")
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
		resp, err := http.Get(base + "/?token=" + token)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		page := string(body)
		if !strings.Contains(page, `data-group="`+key+`"`) || !strings.Contains(page, "MESSAGE_TOO_LARGE") {
			t.Fatalf("the page lacks the group %s:\n%s", key, page)
		}
		if got := strings.Contains(page, "/dlq-groups/"+key+"/replay"); got != actions {
			t.Errorf("token %q: the page offers the group's replay: %v, want %v", token, got, actions)
		}
	}

	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	post := func(token string) *http.Response {
		t.Helper()
		resp, err := client.PostForm(base+"/dlq-groups/"+key+"/replay", url.Values{"token": {token}, "reason": {"limit raised"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := post("wrong"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("group replay with a wrong token: %d; want 403", resp.StatusCode)
	}
	if d, err := o.DeadLetter(context.Background(), id); err != nil || d.Record.Status != outbox.StatusDeadLetter {
		t.Fatalf("after a refused group replay: %v, %v; want still DEAD_LETTER", d.Record.Status, err)
	}
	resp := post("s3cret")
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || !strings.Contains(loc, "done=replay+group+"+key+"%3A+1+message") {
		t.Fatalf("group replay with the token: %d %s", resp.StatusCode, loc)
	}
	if d, err := o.DeadLetter(context.Background(), id); err != nil || d.Record.Status != outbox.StatusPending {
		t.Fatalf("after the group replay: %v, %v; want PENDING", d.Record.Status, err)
	}
	audit, err := o.Audit(context.Background(), 10)
	if err != nil || len(audit) != 1 || audit[0].Actor != "status-page" || audit[0].Reason != "limit raised" ||
		!strings.Contains(string(audit[0].Filter), key) {
		t.Fatalf("audit after the group replay: %+v, %v", audit, err)
	}
}

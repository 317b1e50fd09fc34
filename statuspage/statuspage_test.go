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

// The page lists the topics the relays reported, one that cannot take
// records marked with its reason and fix.
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
	resp, err := http.Get(serve(t, statuspage.Config{Ops: o}) + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	page := string(body)
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

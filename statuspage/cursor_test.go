package statuspage_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/ops"
	"github.com/outbox-dev/outbox/statuspage"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// In cursor mode the page shows the mode, the cursor's position, its leader
// and its lag, and counts the unsent messages of cursor mode as PENDING and the
// passed ones as SENT.
func TestStatusPage_ShowsTheCursorInCursorMode(t *testing.T) {
	t.Parallel()
	pool, schema, st := migrated(t)
	ctx := context.Background()
	if err := st.EnableCursor(ctx); err != nil {
		t.Fatal(err)
	}
	var msgs []outbox.Message
	for _, id := range []string{"1", "2", "3", "4", "5"} {
		msgs = append(msgs, outbox.Message{AggregateType: "Order", AggregateID: id, EventType: "OrderPlaced", Payload: []byte(`{}`)})
	}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return st.Enqueue(ctx, tx, msgs...) }); err != nil {
		t.Fatal(err)
	}
	// The leader published the first two and saved its position.
	if _, err := pool.Exec(ctx, `UPDATE `+pgx.Identifier{schema, "outbox_cursor"}.Sanitize()+`
		SET position = (SELECT min(seq) + 1 FROM `+pgx.Identifier{schema, "outbox_messages"}.Sanitize()+`),
		    lease_owner = 'relay-7', lease_token = gen_random_uuid(), lease_expires_at = now() + interval '30 seconds'`); err != nil {
		t.Fatal(err)
	}
	o, err := ops.New(pool, ops.Config{Schema: schema, ExactSentCount: true})
	if err != nil {
		t.Fatal(err)
	}
	c, err := o.Cursor(ctx)
	if err != nil {
		t.Fatal(err)
	}
	page := getPage(t, serve(t, statuspage.Config{Ops: o})+"/")
	for _, want := range []string{
		`<span id="mode">cursor</span>`,
		`id="cursor-position">` + strconv.FormatInt(c.Position, 10) + `<`,
		`id="cursor-leader">relay-7, lease until`,
		`id="cursor-lag">3 message(s) above the position`,
		`data-status="PENDING">3<`,
		`data-status="SENT">2<`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
}

// In claim mode the page says so and shows no cursor.
func TestStatusPage_ShowsClaimModeWithoutACursor(t *testing.T) {
	t.Parallel()
	o, _ := seed(t)
	if page := getPage(t, serve(t, statuspage.Config{Ops: o})+"/"); !strings.Contains(page, `<span id="mode">claim</span>`) || strings.Contains(page, `id="cursor"`) {
		t.Errorf("the page in claim mode:\n%s", page)
	}
}

// The page shows the mode the outbox records, CDC mode too, since when and
// who switched.
func TestStatusPage_ShowsTheRecordedModeAndWhoSwitched(t *testing.T) {
	t.Parallel()
	pool, schema, st := migrated(t)
	if _, err := st.SetMode(context.Background(), pgstore.ModeCDC, "dave@ops"); err != nil {
		t.Fatal(err)
	}
	o, err := ops.New(pool, ops.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	page := getPage(t, serve(t, statuspage.Config{Ops: o})+"/")
	for _, want := range []string{`<span id="mode">cdc</span>`, `switched by dave@ops`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
}

// getPage returns the body of a GET of url, failing the test unless it is
// 200 OK.
func getPage(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d, %v", url, resp.StatusCode, err)
	}
	return string(body)
}

package sqlitestore_test

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/store/sqlitestore"
)

// headersRule is the error of migration 002's triggers.
const headersRule = "outbox_messages.headers must be a JSON object of string values"

// insertPlain writes a message of aggregate aggID with plain SQL, as a
// writer without Enqueue does, with headers as given and payload {"n":n}.
func insertPlain(ctx context.Context, db *sql.DB, aggID string, n int, headers string) (uuid.UUID, error) {
	id := uuid.New()
	_, err := db.ExecContext(ctx, `INSERT INTO outbox_messages (id, aggregate_type, aggregate_id, event_type, payload, headers)
		VALUES (?, 'Order', ?, 'Happened', ?, ?)`, id.String(), aggID, fmt.Appendf(nil, `{"n":%d}`, n), headers)
	return id, err
}

// An INSERT with plain SQL whose headers are not a JSON object of string
// values is aborted with an error naming the column and the rule; headers
// that are one pass. So does an UPDATE of headers, while an UPDATE of
// anything else leaves the row's headers alone.
func TestHeadersRule_RefusesOtherJSONNamingTheRule(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testCtx(t)
	for _, h := range []string{`{"x": 1}`, `{"a": "ok", "x": null}`, `{"x": {"y": "z"}}`, `[]`, `null`, `"x"`, `7`} {
		if _, err := insertPlain(ctx, b.db, "bad", 0, h); err == nil || !strings.Contains(err.Error(), headersRule) {
			t.Errorf("INSERT of headers %s: error %v; want one with %q", h, err, headersRule)
		}
	}
	if _, err := insertPlain(ctx, b.db, "bad", 0, `not json`); err == nil {
		t.Error("INSERT of headers that are not JSON succeeded")
	}
	var good uuid.UUID
	for _, h := range []string{`{}`, `{"tenant": "acme", "x-empty": ""}`} {
		id, err := insertPlain(ctx, b.db, "good", 0, h)
		if err != nil {
			t.Errorf("INSERT of headers %s: %v", h, err)
		}
		good = id
	}
	_, err := b.db.ExecContext(ctx, `UPDATE outbox_messages SET headers = '{"x": 1}' WHERE id = ?`, good.String())
	if err == nil || !strings.Contains(err.Error(), headersRule) {
		t.Errorf("UPDATE of headers: error %v; want one with %q", err, headersRule)
	}
	if r := b.get(t, good); r.Headers["tenant"] != "acme" {
		t.Errorf("headers after the refused UPDATE: %v; want them unchanged", r.Headers)
	}
	var n int
	if err := b.db.QueryRowContext(ctx, "SELECT count(*) FROM outbox_messages").Scan(&n); err != nil || n != 2 {
		t.Errorf("%d rows (%v); want the 2 good ones", n, err)
	}
}

// A row written before migration 002 whose headers are {"x": 1} stops
// nothing: the migration keeps it, and a relay dead-letters it at once
// with the column and the rule as its reason, without giving it to the
// sink, while the messages around it are published; the later message of
// its aggregate waits.
func TestRelay_RowWrittenBeforeMigration002IsDeadLetteredAndTheOthersArePublished(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	db := open(t, filepath.Join(t.TempDir(), "app.db"))
	st, err := sqlitestore.New(db, sqlitestore.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.MigrateThrough(ctx, 1); err != nil {
		t.Fatalf("Migrate through 001: %v", err)
	}
	if _, err := insertPlain(ctx, db, "A", 0, `{"tenant": "acme"}`); err != nil {
		t.Fatal(err)
	}
	bad, err := insertPlain(ctx, db, "B", 0, `{"x": 1}`)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatalf("Migrate over a row that breaks 002's rule: %v", err)
	}
	behind, after := msg("Order", "B"), msg("Order", "C")
	if err := enqueue(ctx, db, st, behind, after); err != nil {
		t.Fatal(err)
	}

	sink := &orderedSink{failEvery: math.MaxInt, published: map[string][]int{}}
	r, err := relay.New(relay.Config{Store: st, Sink: sink, PollInterval: sqlitestore.PollInterval, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer r.Stop(context.Background())
	bundle := &bundle{db: db, store: st}
	for bundle.get(t, bad).Status != outbox.StatusDeadLetter || bundle.get(t, after.ID).Status != outbox.StatusSent {
		if ctx.Err() != nil {
			t.Fatalf("row with bad headers %s, the message after it %s; want DEAD_LETTER and SENT",
				bundle.get(t, bad).Status, bundle.get(t, after.ID).Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	dead := bundle.get(t, bad)
	if want := `headers["x"]: value must be a string, is a number`; !strings.Contains(dead.LastError, want) || dead.Attempts != 1 {
		t.Errorf("dead letter: attempts %d, reason %q; want 1 attempt and a reason with %q", dead.Attempts, dead.LastError, want)
	}
	time.Sleep(200 * time.Millisecond) // time to overtake the dead letter, if it could
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if s := bundle.get(t, behind.ID).Status; s != outbox.StatusPending {
		t.Errorf("the message behind the dead letter is %s; want PENDING", s)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.published) != 2 || len(sink.published["A"]) != 1 || len(sink.published["C"]) != 1 {
		t.Errorf("published %v; want A and C once each, nothing of B", sink.published)
	}
}

package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// insertRow writes a message into the outbox table with plain SQL, as an
// application or a script that bypasses Enqueue might, and returns its id.
func (e *env) insertRow(aggregateID, headersJSON string) uuid.UUID {
	e.t.Helper()
	id := uuid.Must(uuid.NewV7())
	_, err := e.pool.Exec(context.Background(), `INSERT INTO outbox_messages
		(id, aggregate_type, aggregate_id, event_type, event_version, payload, content_type, headers)
		VALUES ($1, 'Order', $2, 'OrderPlaced', 1, '{"amount":"150.00"}', 'application/json', $3::jsonb)`,
		id, aggregateID, headersJSON)
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// A row written with plain SQL whose own headers claim to be the relay's
// (eventId in another case) or break a limit (a header value over 8 KiB)
// is dead-lettered with the header and the rule as its reason, and nothing
// of it is published; later messages of its aggregate wait, other
// aggregates flow. Corrected and replayed, it is published with the
// relay's eventId and the messages behind it follow.
func TestPlainSQLRowWithBadHeaders_DeadLettersNamingTheHeader(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Schema(t)
	st, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	b := startBroker(t)
	e := &env{t: t, pool: pool, store: st, schema: schema, addrs: b.Addrs(), topic: "integrity." + schema}

	other := oneMessage(t) // the id the spoofing row claims
	spoof := e.insertRow("S", `{"x-tenant": "acme", "EventID": "`+other.ID.String()+`"}`)
	behind := e.insertRow("S", `{}`)
	long := e.insertRow("L", `{"x-note": "`+strings.Repeat("n", outbox.DefaultMaxHeaderValueBytes+1)+`"}`)
	e.enqueue(other)
	runRelay(t, st, e.addrs, e.topic, nil, nil)

	for _, c := range []struct {
		id     uuid.UUID
		reason []string
	}{
		{spoof, []string{`headers["EventID"]`, "the relay sets eventId itself"}},
		{long, []string{`headers["x-note"]`, "value must be at most 8192 bytes, is 8193"}},
	} {
		e.waitStatus(c.id, outbox.StatusDeadLetter, 30*time.Second)
		dead := e.status(c.id)
		for _, want := range c.reason {
			if !strings.Contains(dead.LastError, want) || dead.Attempts != 1 {
				t.Errorf("dead letter %s: attempts %d, reason %q; want 1 attempt and a reason naming %q", c.id, dead.Attempts, dead.LastError, want)
			}
		}
	}
	e.waitStatus(other.ID, outbox.StatusSent, 30*time.Second)
	if s := e.status(behind).Status; s != outbox.StatusPending {
		t.Fatalf("the message behind the dead letter is %s; want PENDING", s)
	}

	if _, err := pool.Exec(context.Background(), `UPDATE outbox_messages SET headers = '{"x-tenant": "acme"}',
		status = 'PENDING', attempts = 0, next_attempt_at = now() WHERE id = $1`, spoof); err != nil {
		t.Fatal(err)
	}
	e.waitStatus(behind, outbox.StatusSent, 30*time.Second)
	recs := consumed(t, e.addrs, e.topic, 3, 30*time.Second)
	var ids []string
	for _, r := range recs {
		ids = append(ids, header(r, "eventId"))
		if string(r.Key) == "L" {
			t.Errorf("a record of the dead-lettered aggregate L was published")
		}
		for _, h := range r.Headers {
			if strings.EqualFold(h.Key, "eventId") && h.Key != "eventId" {
				t.Errorf("record %s carries the message's own %s header", header(r, "eventId"), h.Key)
			}
		}
	}
	if i, j := slices.Index(ids, spoof.String()), slices.Index(ids, behind.String()); i < 0 || j < i {
		t.Errorf("aggregate S published as %v; want %s before %s", ids, spoof, behind)
	}
	want := map[string]bool{other.ID.String(): true, spoof.String(): true, behind.String(): true}
	for _, id := range ids {
		if !want[id] {
			t.Errorf("unexpected eventId %s on the topic; want only %v", id, want)
		}
		delete(want, id)
	}
	if len(want) > 0 {
		t.Errorf("not published: %v", want)
	}
}

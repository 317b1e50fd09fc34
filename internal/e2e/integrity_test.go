package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/relay/cursor"
	"github.com/outbox-dev/outbox/store"
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

// insertRowUnchecked is insertRow for headers that migration 015 refuses:
// its transaction runs with session_replication_role = replica, which
// switches the table's triggers off for it (the tests run as a superuser),
// as for a row written before that migration. It takes its transaction id
// first, as migration 012's trigger, switched off too, would have it do.
func (e *env) insertRowUnchecked(aggregateID, headersJSON string) uuid.UUID {
	e.t.Helper()
	id := uuid.Must(uuid.NewV7())
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		for _, st := range []string{"SELECT pg_current_xact_id()", "SET LOCAL session_replication_role = replica"} {
			if _, err := tx.Exec(ctx, st); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `INSERT INTO outbox_messages
			(id, aggregate_type, aggregate_id, event_type, event_version, payload, content_type, headers)
			VALUES ($1, 'Order', $2, 'OrderEvent', 1, $3, 'application/json', $4::jsonb)`,
			id, aggregateID, fmt.Sprintf(`{"aggregate":%q,"n":0}`, aggregateID), headersJSON)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// A row written with plain SQL whose headers are not a JSON object of
// string values ({"x": 1}, as before migration 015) stops nothing, in claim
// mode and in cursor mode: it is dead-lettered at once with the column and
// the rule as its reason, the messages around it are published, and the
// later message of its aggregate waits. Corrected and replayed, it is
// published, and the message behind it after it.
func TestPlainSQLRowWithHeadersNotStrings_DeadLettersAndTheOthersArePublished(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"claim", "cursor"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			var q store.Queue = e.store
			if mode == "cursor" {
				if err := e.store.EnableCursor(context.Background()); err != nil {
					t.Fatal(err)
				}
				q = cursor.New(e.store).Queue()
			}
			before, behind, after := seqMessage("A", 0), seqMessage("B", 1), seqMessage("C", 0)
			for _, m := range []*outbox.Message{&before, &behind, &after} {
				m.ID = uuid.Must(uuid.NewV7())
			}
			e.enqueue(before)
			bad := e.insertRowUnchecked("B", `{"x": 1}`)
			e.enqueue(behind)
			e.enqueue(after)
			runRelay(t, q, e.addrs, e.topic, nil, nil)

			e.waitStatus(bad, outbox.StatusDeadLetter, 30*time.Second)
			dead := e.status(bad)
			if want := `headers["x"]: value must be a string, is a number`; !strings.Contains(dead.LastError, want) || dead.Attempts != 1 {
				t.Errorf("dead letter: attempts %d, reason %q; want 1 attempt and a reason with %q", dead.Attempts, dead.LastError, want)
			}
			recs := consumed(t, e.addrs, e.topic, 2, 30*time.Second)
			if got := eventIDs(recs); !slices.Equal(got, []string{before.ID.String(), after.ID.String()}) &&
				!slices.Equal(got, []string{after.ID.String(), before.ID.String()}) {
				t.Fatalf("published %v; want %s and %s, once each", got, before.ID, after.ID)
			}
			time.Sleep(500 * time.Millisecond) // time to overtake the dead letter, if it could
			if s := e.status(behind.ID).Status; s != outbox.StatusPending {
				t.Fatalf("the message behind the dead letter is %s; want PENDING", s)
			}

			if _, err := e.pool.Exec(context.Background(), `UPDATE outbox_messages SET headers = '{"x": "1"}',
				status = 'PENDING', attempts = 0, next_attempt_at = now() WHERE id = $1`, bad); err != nil {
				t.Fatal(err)
			}
			e.waitStatus(behind.ID, outbox.StatusSent, 30*time.Second)
			recs = consumed(t, e.addrs, e.topic, 4, 30*time.Second)
			ids := eventIDs(recs)
			if i, j := slices.Index(ids, bad.String()), slices.Index(ids, behind.ID.String()); i < 0 || j < i || len(ids) != 4 {
				t.Fatalf("published %v; want the 4 messages once each, %s before %s", ids, bad, behind.ID)
			}
			if x := header(recs[slices.Index(ids, bad.String())], "x"); x != "1" {
				t.Errorf("the corrected message's header x is %q; want 1", x)
			}
		})
	}
}

// eventIDs are the eventId headers of recs, in order.
func eventIDs(recs []*kgo.Record) []string {
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = header(r, "eventId")
	}
	return ids
}

package cdc_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/broker"
)

// A row written into the outbox table with plain SQL, whose own headers
// claim to be the relay's (eventId in another case), arrives from the
// stream like any insert: as in polling mode it is dead-lettered with the
// header and the rule as its reason, nothing of it is published, the later
// messages of its aggregate wait and other aggregates flow.
func TestStream_PlainSQLRowWithReservedHeader_DeadLettersNamingTheHeader(t *testing.T) {
	t.Parallel()
	e := newEnv(t, broker.Config{})
	r := e.start(e.config(e.newSink(nil)))
	e.waitLeader(r, 20*time.Second)

	insert := func(agg string, n int, headers string) {
		_, err := e.pool.Exec(context.Background(), `INSERT INTO outbox_messages
			(id, aggregate_type, aggregate_id, event_type, event_version, payload, content_type, headers)
			VALUES ($1, 'Order', $2, 'OrderEvent', 1, $3, 'application/json', $4::jsonb)`,
			uuid.Must(uuid.NewV7()), agg, fmt.Sprintf(`{"aggregate":%q,"n":%d}`, agg, n), headers)
		if err != nil {
			t.Fatal(err)
		}
	}
	insert("x", 0, `{"x-tenant": "acme", "EVENTID": "`+uuid.NewString()+`"}`)
	insert("x", 1, `{}`)
	e.enqueue(seqMessage("y", 0))

	dead := e.waitStatus("x", 0, outbox.StatusDeadLetter, 20*time.Second)
	for _, want := range []string{`headers["EVENTID"]`, "the relay sets eventId itself"} {
		if !strings.Contains(dead.LastError, want) || dead.Attempts != 1 {
			t.Errorf("dead letter: attempts %d, reason %q; want 1 attempt and a reason naming %q", dead.Attempts, dead.LastError, want)
		}
	}
	e.waitStatus("y", 0, outbox.StatusSent, 20*time.Second)
	if s := e.status("x", 1).Status; s != outbox.StatusPending {
		t.Errorf("x#1 is %s behind a dead letter; want PENDING", s)
	}
	for _, rec := range e.consumed(1, 10*time.Second) {
		if string(rec.Key) != "y" {
			t.Errorf("a record of aggregate %q was published: %s", rec.Key, rec.Value)
		}
	}
}

// A row whose headers are not a JSON object of string values ({"x": 1},
// written before migration 015 refused it: here with the table's triggers
// off for its transaction) arrives from the stream like any insert, and is
// dead-lettered with the column and the rule as its reason, as in polling
// mode; the later messages of its aggregate wait and other aggregates flow.
func TestStream_PlainSQLRowWithHeadersNotStrings_DeadLettersNamingTheRule(t *testing.T) {
	t.Parallel()
	e := newEnv(t, broker.Config{})
	r := e.start(e.config(e.newSink(nil)))
	e.waitLeader(r, 20*time.Second)

	ctx := context.Background()
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		// Triggers off (the tests run as a superuser); the transaction
		// takes its id first, as migration 012's trigger would have it do.
		for _, st := range []string{"SELECT pg_current_xact_id()", "SET LOCAL session_replication_role = replica"} {
			if _, err := tx.Exec(ctx, st); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `INSERT INTO outbox_messages
			(id, aggregate_type, aggregate_id, event_type, event_version, payload, content_type, headers)
			VALUES ($1, 'Order', 'x', 'OrderEvent', 1, '{"aggregate":"x","n":0}', 'application/json', '{"x": 1}')`,
			uuid.Must(uuid.NewV7()))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	e.enqueue(seqMessage("x", 1))
	e.enqueue(seqMessage("y", 0))

	dead := e.waitStatus("x", 0, outbox.StatusDeadLetter, 20*time.Second)
	if want := `headers["x"]: value must be a string, is a number`; !strings.Contains(dead.LastError, want) || dead.Attempts != 1 {
		t.Errorf("dead letter: attempts %d, reason %q; want 1 attempt and a reason with %q", dead.Attempts, dead.LastError, want)
	}
	e.waitStatus("y", 0, outbox.StatusSent, 20*time.Second)
	if s := e.status("x", 1).Status; s != outbox.StatusPending {
		t.Errorf("x#1 is %s behind a dead letter; want PENDING", s)
	}
	for _, rec := range e.consumed(1, 10*time.Second) {
		if string(rec.Key) != "y" {
			t.Errorf("a record of aggregate %q was published: %s", rec.Key, rec.Value)
		}
	}
}

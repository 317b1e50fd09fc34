package ops_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/ops"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/relay/cdc"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/sink/kafka"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// Every Kafka error code franz-go knows classes a dead letter by its name,
// also behind a topic whose name looks like a code and in the wrappers
// the sink puts around retriable and topic errors; "max attempts: " says
// when the error was retriable.
func TestDeadLetterClass_EveryKafkaCodeIsItsName(t *testing.T) {
	t.Parallel()
	b := setup(t)
	want := map[uuid.UUID]string{}
	var ms []outbox.Message
	seen := map[string]bool{}
	for code := int16(-1); code < 1000; code++ {
		ke := kerr.TypedErrorForCode(code)
		if ke == nil || seen[ke.Message] {
			continue
		}
		seen[ke.Message] = true
		m := msg("Order", ke.Message, "OrderPlaced")
		ms = append(ms, m)
		err := kafka.ClassifyError(fmt.Errorf("kafka: publish message %s to topic ORDERS_V2: %w", m.ID, ke))
		want[m.ID] = "max attempts: " + ke.Message
		if errors.Is(err, sink.ErrPermanent) {
			want[m.ID] = ke.Message
		}
		b.enqueue(t, m)
		b.exec(t, "UPDATE {{schema}}.outbox_messages SET status = 'DEAD_LETTER', attempts = 1, last_error = $2 WHERE id = $1",
			m.ID, err.Error())
	}
	list, err := b.ops.DeadLetters(testCtx(t), ops.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(ms) || len(ms) < 100 {
		t.Fatalf("%d dead letters listed of %d codes", len(list), len(ms))
	}
	for _, d := range list {
		if d.ErrorClass != want[d.ID] {
			t.Errorf("%s: class %q, want %q (error %q)", d.AggregateID, d.ErrorClass, want[d.ID], d.LastError)
		}
	}
}

// The dead letters the relay makes itself, as their three paths store
// them, are classed by their reason: without the message's id or topic,
// cut at a word, with no space at the end. The relay refuses a row whose
// headers are not strings, the Kafka sink a reserved header, CDC a headers
// column it cannot decode; the relay's and CDC's text for the same cause
// make one class.
func TestDeadLetterClass_OfTheRelaysOwnTextsIsTheReason(t *testing.T) {
	t.Parallel()
	brk, err := broker.Start(broker.Config{Listen: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(brk.Close)
	poll := setup(t)
	reserved := poll.insertRow(t, "r", `{"EVENTID": "`+uuid.NewString()+`"}`, false)
	notStrings := poll.insertRow(t, "s", `{"x": 1}`, true)
	poll.runRelay(t, brk)
	stream := setup(t)
	stream.runCDC(t)
	undecodable := stream.insertRow(t, "c", `{"x": 1}`, true)

	const notAString = `outbox: invalid message: headers["x"]: value must be a string, is a number`
	for _, c := range []struct {
		b                 *bundle
		id                uuid.UUID
		path, class, what string
	}{
		{poll, reserved, "kafka: message " + reserved.String() + " not published to topic orders: ",
			`outbox: invalid message: headers["EVENTID"]: name is reserved: the relay sets…`, "the Kafka sink's"},
		{poll, notStrings, "relay: message " + notStrings.String() + " not published: ", notAString, "the relay's"},
		{stream, undecodable, "cdc: decode column headers: ", notAString, "CDC's"},
	} {
		waitFor(t, 30*time.Second, func() bool { return c.b.status(t, c.id) == outbox.StatusDeadLetter })
		list, err := c.b.ops.DeadLetters(testCtx(t), ops.Filter{AggregateID: c.b.get(t, c.id).AggregateID})
		if err != nil || len(list) != 1 {
			t.Fatalf("%s dead letter: %+v, %v", c.what, list, err)
		}
		if d := list[0]; !strings.HasPrefix(d.LastError, sink.ErrPermanent.Error()+": "+c.path) || d.ErrorClass != c.class {
			t.Errorf("%s dead letter %q: class %q, want %q", c.what, d.LastError, d.ErrorClass, c.class)
		}
	}
}

// insertRow writes a message of aggregate aggID with plain SQL and the
// headers given, as an application that bypasses Enqueue might; unchecked,
// in a transaction whose session_replication_role is replica, so that
// migration 015's trigger does not refuse headers that are not strings (as
// for a row written before it). It takes its transaction id first, as
// migration 012's trigger would have it do.
func (b *bundle) insertRow(t *testing.T, aggID, headers string, unchecked bool) uuid.UUID {
	t.Helper()
	ctx := testCtx(t)
	id := uuid.Must(uuid.NewV7())
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if unchecked {
			for _, st := range []string{"SELECT pg_current_xact_id()", "SET LOCAL session_replication_role = replica"} {
				if _, err := tx.Exec(ctx, st); err != nil {
					return err
				}
			}
		}
		_, err := tx.Exec(ctx, b.sql(`INSERT INTO {{schema}}.outbox_messages
			(id, aggregate_type, aggregate_id, event_type, event_version, payload, content_type, headers)
			VALUES ($1, 'Order', $2, 'OrderPlaced', 1, '{"n":0}', 'application/json', $3::jsonb)`), id, aggID, headers)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// newKafkaSink is a Kafka sink on brk whose topic is orders.
func newKafkaSink(t *testing.T, brk *broker.Broker) *kafka.Sink {
	t.Helper()
	ks, err := kafka.New(kafka.Config{Brokers: brk.Addrs(), DefaultTopic: "orders", AllowAutoTopicCreation: true,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ks.Close() }) // after the relay stopped
	return ks
}

// runRelay runs a polling relay with a Kafka sink on brk until the test
// ends.
func (b *bundle) runRelay(t *testing.T, brk *broker.Broker) {
	t.Helper()
	rl, err := relay.New(relay.Config{Store: b.store, Sink: newKafkaSink(t, brk), PollInterval: 20 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := rl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		<-rl.Stopped()
	})
}

// runCDC runs a CDC relay (with a sink that publishes nothing it is not
// given) until the test ends, once it streams from its slot; then it
// removes the slot.
func (b *bundle) runCDC(t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cdc.Remove(ctx, b.pool, b.schema, "", ""); err != nil {
			t.Logf("remove the CDC slot of %s: %v", b.schema, err)
		}
	})
	if _, err := b.store.SetMode(testCtx(t), pgstore.ModeCDC, "test"); err != nil {
		t.Fatal(err)
	}
	r, err := cdc.New(cdc.Config{Pool: b.pool, Sink: &recordingSink{}, Schema: b.schema,
		StatusInterval: 100 * time.Millisecond, HeartbeatInterval: time.Second, StandbyInterval: 100 * time.Millisecond,
		TablePathInterval: 100 * time.Millisecond, ShutdownTimeout: 5 * time.Second, Lease: 5 * time.Second,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = r.Stop(ctx)
	})
	waitFor(t, 20*time.Second, func() bool {
		l, err := r.Lag(testCtx(t))
		return err == nil && l.Leader
	})
}

// The error class costs a few microseconds per dead letter, which the
// status page and every replay by group pay for each dead letter. No test
// can time that without being flaky, so this one checks the two ways it
// went wrong: a regular expression of kilobytes (an alternative per Kafka
// error code: 0.35 ms per row), and expressions that PostgreSQL computes
// again wherever their result is used (the class in the group key, the
// output and the filters). Every literal of the statements is short, and
// regexp_replace, counted through a function of the same name that the
// search path puts first, runs 4 times per dead letter without a Kafka
// code: once for the prefixes, three times for the text.
func TestDeadLetterClass_ShortPatternsComputedOncePerRow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ms := nMsgs(30, "Order", "OrderPlaced")
	b.enqueue(t, ms...)
	b.exec(t, `UPDATE {{schema}}.outbox_messages SET status = 'DEAD_LETTER', attempts = 3,
		last_error = 'kafka: publish message ' || id || ' to topic orders: dial tcp 10.0.0.' || seq || ':9092: connection refused'`)
	for _, args := range []string{"s text, p text, r text", "s text, p text, r text, f text"} {
		b.exec(t, `CREATE FUNCTION {{schema}}.regexp_replace(`+args+`) RETURNS text IMMUTABLE LANGUAGE plpgsql
			AS $$ BEGIN RETURN pg_catalog.regexp_replace(`+regexp.MustCompile(` text`).ReplaceAllString(args, "")+`); END $$`)
	}
	comment, literal := regexp.MustCompile(`(?m)--.*$`), regexp.MustCompile(`'((?:[^']|'')*)'`)
	for name, q := range b.ops.QueriesForExplain(0) {
		if !strings.HasPrefix(name, "dlq_") {
			continue
		}
		for _, m := range literal.FindAllStringSubmatch(comment.ReplaceAllString(q.SQL, ""), -1) {
			if len(m[1]) > 200 {
				t.Errorf("%s has a literal of %d characters: %.80s...", name, len(m[1]), m[1])
			}
		}
		if calls := b.regexpCalls(t, q.SQL, q.Args); calls != 4*len(ms) {
			t.Errorf("%s runs regexp_replace %d times for %d dead letters, want 4 per dead letter", name, calls, len(ms))
		}
	}
	if strings.ContainsAny(sink.ErrPermanent.Error(), `'\`) {
		t.Error("the permanent error's text, rendered into string literals, holds a quote or a backslash")
	}
}

// regexpCalls runs sql with the test's schema first in the search path and
// returns how often it called the schema's regexp_replace. The counts of
// pg_stat_xact_user_functions may include earlier transactions of the
// session whose counts were not yet reported, hence the difference.
func (b *bundle) regexpCalls(t *testing.T, sql string, args []any) int {
	t.Helper()
	ctx := testCtx(t)
	const count = `SELECT coalesce(sum(calls), 0) FROM pg_stat_xact_user_functions
		WHERE schemaname = $1 AND funcname = 'regexp_replace'`
	var before, after int
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT set_config('search_path', $1, true), set_config('track_functions', 'pl', true)",
			pgx.Identifier{b.schema}.Sanitize()+", pg_catalog"); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, count, b.schema).Scan(&before); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		for rows.Next() {
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return tx.QueryRow(ctx, count, b.schema).Scan(&after)
	})
	if err != nil {
		t.Fatal(err)
	}
	return after - before
}

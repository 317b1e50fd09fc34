package pgstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgstoretest"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// headersRule is the start of the error of migration 015's rule.
const headersRule = "outbox_messages.headers must be a JSON object of string values: "

// refusedHeaders are headers that migration 015 refuses, with the end of
// the error it gives for each.
var refusedHeaders = []struct{ json, what string }{
	{`{"x": 1}`, `the value of "x" is a number`},
	{`{"a": "ok", "x": null}`, `the value of "x" is null`},
	{`{"x": true, "b": ["y"]}`, `the value of "b" is an array`},
	{`{"x": {"y": "z"}}`, `the value of "x" is an object`},
	{`[]`, "it is an array"},
	{`null`, "it is null"},
	{`"x"`, "it is a string"},
}

// insertSQL writes a row with plain SQL, as a writer without Enqueue does.
const insertSQL = `INSERT INTO {{schema}}.outbox_messages
	(id, aggregate_type, aggregate_id, event_type, event_version, payload, content_type, headers, created_at)
	VALUES ($1, 'Order', $2, 'OrderPlaced', 1, '{"n":1}', 'application/json', $3::jsonb, $4)`

// insertPlain writes a row with plain SQL created at, and returns its id.
func (b *bundle) insertPlain(t *testing.T, aggregateID, headers string, at time.Time) (uuid.UUID, error) {
	t.Helper()
	id := uuid.New()
	_, err := b.Pool.Exec(pgstoretest.Context(t), b.SQL(insertSQL), id, aggregateID, headers, at)
	return id, err
}

// assertRefused checks that err is the refusal of migration 015's rule:
// a check violation naming the constraint, the column and what is wrong.
func assertRefused(t *testing.T, what string, err error, want string) {
	t.Helper()
	var pgErr *pgconn.PgError
	switch {
	case !errors.As(err, &pgErr):
		t.Errorf("%s: error %v; want the rule's check violation", what, err)
	case pgErr.Code != "23514" || pgErr.ConstraintName != "outbox_messages_headers_are_strings" || pgErr.ColumnName != "headers":
		t.Errorf("%s: SQLSTATE %s, constraint %q, column %q; want 23514, outbox_messages_headers_are_strings, headers",
			what, pgErr.Code, pgErr.ConstraintName, pgErr.ColumnName)
	case pgErr.Message != headersRule+want:
		t.Errorf("%s: message %q; want %q", what, pgErr.Message, headersRule+want)
	}
}

// An INSERT with plain SQL whose headers are not a JSON object of string
// values fails with a check violation that names the constraint and says
// what is wrong; headers that are one pass. So does an UPDATE of headers.
// On a partitioned outbox every partition (the current one and the
// default) holds to it.
func TestHeadersRule_RefusesOtherJSONNamingTheRule(t *testing.T) {
	t.Parallel()
	for name, setup := range map[string]func(*testing.T) *bundle{
		"plain":       setup,
		"partitioned": func(t *testing.T) *bundle { return setupPartitioned(t, time.Hour) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			now, later := b.dbNow(t), b.dbNow(t).AddDate(10, 0, 0) // later: the default partition
			for _, at := range []time.Time{now, later} {
				for _, h := range refusedHeaders {
					_, err := b.insertPlain(t, "bad", h.json, at)
					assertRefused(t, "INSERT of headers "+h.json, err, h.what)
				}
				for _, h := range []string{`{}`, `{"tenant": "acme", "x-empty": ""}`} {
					if _, err := b.insertPlain(t, "good", h, at); err != nil {
						t.Errorf("INSERT of headers %s: %v", h, err)
					}
				}
			}
			_, err := b.Pool.Exec(pgstoretest.Context(t), b.SQL(`UPDATE {{schema}}.outbox_messages SET headers = '{"x": 1}'`))
			assertRefused(t, "UPDATE of headers", err, refusedHeaders[0].what)
			if n := b.Count(t); n != 4 {
				t.Errorf("%d rows in the table; want the 4 good ones", n)
			}
		})
	}
}

// Rows written before migration 015 with headers that break its rule stay
// (the migration reads no row), and move through their states: the claim
// leases them as invalid records beside the valid ones, and they can be
// dead-lettered and discarded. Their headers can only be corrected.
func TestHeadersRule_RowsWrittenBeforeMigration015MoveThroughTheirStates(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Schema(t)
	st, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	ctx := pgstoretest.Context(t)
	if err := st.MigrateThrough(ctx, 14); err != nil {
		t.Fatalf("Migrate through 014: %v", err)
	}
	b := &bundle{&pgstoretest.Bundle{Pool: pool, Schema: schema, Store: st}}
	now := b.dbNow(t)
	good, err := b.insertPlain(t, "good", `{"tenant": "acme"}`, now)
	if err != nil {
		t.Fatal(err)
	}
	var bad []uuid.UUID
	for _, h := range refusedHeaders[:2] {
		id, err := b.insertPlain(t, "bad-"+h.json, h.json, now)
		if err != nil {
			t.Fatalf("INSERT before migration 015: %v", err)
		}
		bad = append(bad, id)
	}
	if err := b.Store.Migrate(ctx); err != nil {
		t.Fatalf("Migrate over rows that break 015's rule: %v", err)
	}

	c, err := b.Store.Claim(ctx, store.ClaimParams{Owner: "r", Limit: 10, Lease: time.Minute})
	if err != nil || len(c.Records) != 3 {
		t.Fatalf("Claim = %d records, %v; want the good one and the 2 bad ones", len(c.Records), err)
	}
	if r := c.Records[0]; r.ID != good || r.Invalid != nil || r.Headers["tenant"] != "acme" {
		t.Errorf("first claimed %s, headers %v, invalid %v; want %s read whole", r.ID, r.Headers, r.Invalid, good)
	}
	for _, r := range c.Records[1:] {
		if r.Invalid == nil || !strings.Contains(r.Invalid.Error(), `headers["x"]: value must be a string`) {
			t.Errorf("claimed %s with Invalid %v; want one naming headers[\"x\"]", r.ID, r.Invalid)
		}
	}
	n, err := b.Store.MarkFailed(ctx, c.Token, []store.Failure{
		{Seq: c.Records[1].Seq, Error: c.Records[1].Invalid.Error(), CountAttempt: true, Dead: true},
		{Seq: c.Records[2].Seq, Error: c.Records[2].Invalid.Error(), CountAttempt: true, Dead: true},
	})
	if err != nil || n != 2 {
		t.Fatalf("MarkFailed of the bad rows = %d, %v; want 2 dead letters", n, err)
	}
	b.Exec(t, "UPDATE {{schema}}.outbox_messages SET status = 'DISCARDED', discarded_at = now() WHERE id = $1", bad[1])
	_, err = pool.Exec(ctx, b.SQL("UPDATE {{schema}}.outbox_messages SET headers = headers WHERE id = $1"), bad[0])
	assertRefused(t, "UPDATE of a bad row's headers to themselves", err, refusedHeaders[0].what)
	b.Exec(t, `UPDATE {{schema}}.outbox_messages SET headers = '{"x": "1"}' WHERE id = $1`, bad[0])
	if r := b.Get(t, bad[0]); r.Invalid != nil || r.Headers["x"] != "1" || r.Status != outbox.StatusDeadLetter {
		t.Errorf("corrected dead letter: %s, headers %v, invalid %v; want DEAD_LETTER with x=1", r.Status, r.Headers, r.Invalid)
	}
}

// On an outbox partitioned before migration 015, the migration puts the
// rule on the partitioned table, and so on every partition (those attached
// later too); the rows already there stay.
func TestHeadersRule_AddedToAnOutboxPartitionedBefore(t *testing.T) {
	t.Parallel()
	b := setupPartitioned(t, time.Hour)
	// The state before migration 015: no rule, and 015 not recorded.
	b.Exec(t, `DROP TRIGGER outbox_messages_headers_are_strings ON {{schema}}.outbox_messages;
		DROP FUNCTION {{schema}}.outbox_refuse_headers(), {{schema}}.outbox_headers_are_strings(jsonb), {{schema}}.outbox_json_kind(jsonb);
		DELETE FROM {{schema}}.outbox_migrations WHERE version = 15`)
	older, err := b.insertPlain(t, "old", `{"x": 1}`, b.dbNow(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := pgstoretest.Context(t)
	if err := b.Store.Migrate(ctx); err != nil {
		t.Fatalf("Migrate 015 onto the partitioned outbox: %v", err)
	}
	if _, err := b.Store.EnsurePartitions(ctx, 6); err != nil {
		t.Fatal(err)
	}
	assertRuleOnEveryPartition(t, b)
	_, err = b.insertPlain(t, "new", `{"x": 1}`, b.dbNow(t).Add(4*time.Hour))
	assertRefused(t, "INSERT into a partition attached after 015", err, refusedHeaders[0].what)
	if r := b.Get(t, older); r.Invalid == nil {
		t.Errorf("row from before 015 read with Invalid nil; want its headers refused")
	}
}

// Partitioning a table whose older rows break the rule keeps them (nothing
// is validated) and carries the rule over to the partitioned table.
func TestHeadersRule_PartitioningKeepsOlderRowsAndTheRule(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := pgstoretest.Context(t)
	older := pgstoretest.Msg("Order", "old")
	if err := b.InsertUnchecked(ctx, older, `{"x": 1}`); err != nil {
		t.Fatal(err)
	}
	p, err := pgstore.New(b.Pool, pgstore.Config{Schema: b.Schema, Partitioning: pgstore.Partitioning{Interval: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Migrate(ctx); err != nil {
		t.Fatalf("Migrate with Partitioning over a row that breaks the rule: %v", err)
	}
	b.Store = p
	assertRuleOnEveryPartition(t, b)
	_, err = b.insertPlain(t, "new", `[]`, b.dbNow(t))
	assertRefused(t, "INSERT after partitioning", err, "it is an array")
	if r := b.Get(t, older.ID); r.Invalid == nil {
		t.Errorf("row from before partitioning read with Invalid nil; want its headers refused")
	}
}

// assertRuleOnEveryPartition checks that migration 015's trigger is on the
// partitioned outbox_messages and on each of its partitions, once.
func assertRuleOnEveryPartition(t *testing.T, b *bundle) {
	t.Helper()
	var parts, withRule, onParent int
	err := b.Pool.QueryRow(pgstoretest.Context(t), b.SQL(`SELECT
		(SELECT count(*) FROM pg_inherits WHERE inhparent = '{{schema}}.outbox_messages'::regclass),
		(SELECT count(*) FROM pg_inherits i JOIN pg_trigger tg ON tg.tgrelid = i.inhrelid
		 WHERE i.inhparent = '{{schema}}.outbox_messages'::regclass AND tg.tgname = 'outbox_messages_headers_are_strings'),
		(SELECT count(*) FROM pg_trigger
		 WHERE tgrelid = '{{schema}}.outbox_messages'::regclass AND tgname = 'outbox_messages_headers_are_strings')`)).
		Scan(&parts, &withRule, &onParent)
	if err != nil {
		t.Fatal(err)
	}
	if onParent != 1 || parts < 2 || withRule != parts {
		t.Errorf("rule on the parent %d time(s), on %d of %d partitions; want once, and on each", onParent, withRule, parts)
	}
}

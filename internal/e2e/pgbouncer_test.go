package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/ops"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/relay/cdc"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// bouncerModes are pgx's query exec modes that work behind PgBouncer in
// transaction pooling mode, as the README says. The tests in this file run
// the outbox through such a PgBouncer (pgtest.BouncerURL; .ci/pgbouncer.sh
// starts it): a server connection serves a client for one transaction
// only, and PgBouncer 1.18 keeps no named prepared statement.
var bouncerModes = []string{"exec", "simple_protocol", "cache_describe"}

// bouncerEnv is a test's outbox behind PgBouncer: its own schema (created
// directly), a store on a pool through PgBouncer, and a broker.
type bouncerEnv struct {
	t      *testing.T
	url    string        // PgBouncer, with default_query_exec_mode
	pool   *pgxpool.Pool // through PgBouncer
	store  *pgstore.Store
	schema string
	addrs  []string
	topic  string
}

func newBouncerEnv(t *testing.T, mode string) *bouncerEnv {
	t.Helper()
	_, schema := pgtest.Schema(t)
	e := &bouncerEnv{t: t, url: pgtest.BouncerURL(t, mode), pool: pgtest.BouncerPool(t, mode), schema: schema}
	st, err := pgstore.New(e.pool, pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	e.store = st
	e.addrs = startBroker(t).Addrs()
	e.topic = "e2e." + schema
	return e
}

// migrate applies the migrations with Store.Migrate through PgBouncer and
// creates the application's table.
func (e *bouncerEnv) migrate() {
	e.t.Helper()
	if err := e.store.Migrate(context.Background()); err != nil {
		e.t.Fatalf("migrate through PgBouncer: %v", err)
	}
	e.createOrders()
}

// createOrders creates the application's table.
func (e *bouncerEnv) createOrders() {
	e.t.Helper()
	e.exec(`CREATE TABLE {{schema}}.orders (id text PRIMARY KEY, n int NOT NULL)`)
}

// env is the environment of an outbox process of this test: database URL
// (through PgBouncer), schema, brokers and topic.
func (e *bouncerEnv) env() []string {
	return []string{"OUTBOX_DATABASE_URL=" + e.url, "OUTBOX_SCHEMA=" + e.schema,
		"OUTBOX_KAFKA_BROKERS=" + strings.Join(e.addrs, ","), "OUTBOX_DEFAULT_TOPIC=" + e.topic,
		"OUTBOX_KAFKA_AUTO_CREATE_TOPICS=true", "OUTBOX_LOG_LEVEL=info"}
}

// outbox runs an outbox command to its end and returns its standard
// output; it fails the test if the command fails.
func (e *bouncerEnv) outbox(args ...string) string {
	e.t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), e.env()...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		e.t.Fatalf("outbox %s through PgBouncer: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// outboxJSON runs an outbox command with --json and decodes its output.
func (e *bouncerEnv) outboxJSON(v any, args ...string) {
	e.t.Helper()
	out := e.outbox(append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		e.t.Fatalf("outbox %s --json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// sql returns q with {{schema}} replaced by the test's schema.
func (e *bouncerEnv) sql(q string) string {
	return strings.ReplaceAll(q, "{{schema}}", pgx.Identifier{e.schema}.Sanitize())
}

// exec runs q ({{schema}} replaced) through PgBouncer.
func (e *bouncerEnv) exec(q string, args ...any) {
	e.t.Helper()
	if _, err := e.pool.Exec(context.Background(), e.sql(q), args...); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
}

// count returns the result of a count(*) query q ({{schema}} replaced).
func (e *bouncerEnv) count(q string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), e.sql(q), args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", q, err)
	}
	return n
}

// waitAllSent waits until every message is SENT (the relay marks a batch
// after the broker's ack, so shortly after the consumer sees it).
func (e *bouncerEnv) waitAllSent(within time.Duration) {
	e.t.Helper()
	waitFor(e.t, "every message SENT", within, func() bool {
		return e.count(`SELECT count(*) FROM {{schema}}.outbox_messages WHERE status <> 'SENT'`) == 0
	})
}

// openDB opens database/sql with the pgx driver through PgBouncer, with the
// same query exec mode.
func (e *bouncerEnv) openDB() *sql.DB {
	e.t.Helper()
	cfg, err := pgx.ParseConfig(e.url)
	if err != nil {
		e.t.Fatal(err)
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(4)
	e.t.Cleanup(func() { db.Close() })
	return db
}

// relayPool opens the relay's pool through PgBouncer, configured as the
// relay command configures its own.
func (e *bouncerEnv) relayPool() *pgxpool.Pool {
	e.t.Helper()
	cfg, err := pgxpool.ParseConfig(e.url)
	if err != nil {
		e.t.Fatal(err)
	}
	cfg.MaxConns = 4
	pgstore.ConfigureRelayPool(cfg)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(pool.Close)
	return pool
}

// orderTx is one business transaction of the application: it writes the
// order row and enqueues its event, and commits or rolls back.
type orderTx struct {
	agg      string
	n        int
	rollback bool
}

func (o orderTx) id() string { return fmt.Sprintf("%s-%d", o.agg, o.n) }

func (o orderTx) message() outbox.Message {
	m := seqMessage(o.agg, o.n)
	if o.rollback {
		m.EventType = "RolledBack"
	}
	return m
}

var errRollback = errors.New("the application rolls this transaction back")

// insertOrder is the application's own write in its transaction.
const insertOrder = `INSERT INTO {{schema}}.orders (id, n) VALUES ($1, $2)`

// enqueuePgx runs o in a pgx transaction with Store.Enqueue.
func (e *bouncerEnv) enqueuePgx(ctx context.Context, o orderTx) error {
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, e.sql(insertOrder), o.id(), o.n); err != nil {
			return err
		}
		if err := e.store.Enqueue(ctx, tx, o.message()); err != nil {
			return err
		}
		if o.rollback {
			return errRollback
		}
		return nil
	})
	if errors.Is(err, errRollback) {
		return nil
	}
	return err
}

// enqueueSQL runs o in a database/sql transaction with Store.SQL().Enqueue.
func (e *bouncerEnv) enqueueSQL(ctx context.Context, db *sql.DB, o orderTx) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit
	if _, err := tx.ExecContext(ctx, e.sql(insertOrder), o.id(), o.n); err != nil {
		return err
	}
	if err := e.store.SQL().Enqueue(ctx, tx, o.message()); err != nil {
		return err
	}
	if o.rollback {
		return tx.Rollback()
	}
	return tx.Commit()
}

// writeOrders runs writers at once, half with pgx and half with
// database/sql, each with aggregates of its own, perAggregate transactions
// per aggregate; every fifth transaction rolls back. It returns the number
// of committed events per aggregate, numbered from 0 in commit order.
func (e *bouncerEnv) writeOrders(writers, aggsPerWriter, perAggregate int) map[string]int {
	e.t.Helper()
	ctx := context.Background()
	db := e.openDB()
	want := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for a := range aggsPerWriter {
				agg := fmt.Sprintf("w%d-a%d", w, a)
				committed := 0
				for i := range perAggregate {
					o := orderTx{agg: agg, n: committed, rollback: i%5 == 4}
					if o.rollback {
						o.n = 1000 + i // never a committed number
					}
					var err error
					if w%2 == 0 {
						err = e.enqueuePgx(ctx, o)
					} else {
						err = e.enqueueSQL(ctx, db, o)
					}
					if err != nil {
						errs <- fmt.Errorf("writer %d, %s: %w", w, o.id(), err)
						return
					}
					if !o.rollback {
						committed++
					}
				}
				mu.Lock()
				want[agg] = committed
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		e.t.Fatalf("enqueue through PgBouncer: %v", err)
	}
	return want
}

// An application enqueues in its own transactions through PgBouncer in
// transaction pooling mode, with pgx (Store.Enqueue) and database/sql
// (Store.SQL().Enqueue), while a relay without LISTEN claims through it too:
// every committed event reaches the broker, in order per aggregate, and no
// event of a rolled-back transaction does, in each query exec mode the
// README names.
func TestPgBouncer_EnqueueInAppTransactionsAndRelay_DeliverInOrder(t *testing.T) {
	t.Parallel()
	for _, mode := range bouncerModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			e := newBouncerEnv(t, mode)
			e.migrate()
			st, err := pgstore.New(e.relayPool(), pgstore.Config{Schema: e.schema})
			if err != nil {
				t.Fatal(err)
			}
			runRelay(t, st, e.addrs, e.topic, func(c *relay.Config) {
				c.DisableListen = true
				c.Workers = 3
				c.BatchSize = 20
				c.PollInterval = 50 * time.Millisecond
			}, nil)
			want := e.writeOrders(4, 5, 25)
			total := sum(want)
			recs := consumed(t, e.addrs, e.topic, total, 60*time.Second)
			dups := checkOrder(t, recs, want)
			for _, r := range recs {
				if header(r, "eventType") == "RolledBack" {
					t.Fatalf("event %s of a rolled-back transaction was published", header(r, "eventId"))
				}
			}
			if n := e.count(`SELECT count(*) FROM {{schema}}.orders`); n != total {
				t.Fatalf("%d order rows committed; want %d", n, total)
			}
			if n := e.count(`SELECT count(*) FROM {{schema}}.outbox_messages WHERE event_type = 'RolledBack'`); n != 0 {
				t.Fatalf("%d messages of rolled-back transactions in the outbox", n)
			}
			e.waitAllSent(10 * time.Second)
			t.Logf("%d events, %d duplicates", total, dups)
		})
	}
}

// The relay command with --no-listen, migrated by the migrate command,
// both through PgBouncer: it publishes every committed event of the
// application's transactions in order per aggregate, without a failed
// statement, and stops cleanly on SIGTERM.
func TestPgBouncer_RelayCommandNoListen_DeliversInOrder(t *testing.T) {
	t.Parallel()
	e := newBouncerEnv(t, "exec")
	e.outbox("migrate")
	e.createOrders()
	p := start(t, e.env(), "relay", "--no-listen", "--poll-interval", "100ms", "--workers", "3", "--batch-size", "20")
	p.waitFor("relay started", 30*time.Second)
	want := e.writeOrders(4, 5, 25)
	total := sum(want)
	checkOrder(t, consumed(t, e.addrs, e.topic, total, 60*time.Second), want)
	e.waitAllSent(10 * time.Second)
	if code := p.stop(30 * time.Second); code != 0 {
		t.Fatalf("relay exited %d after SIGTERM:\n%s", code, p.output())
	}
	if out := p.output(); strings.Contains(out, "level=WARN") || strings.Contains(out, "level=ERROR") {
		t.Fatalf("relay behind PgBouncer warned or failed:\n%s", out)
	}
}

// poisonSink refuses, as the broker refuses a record it will never
// accept, the events of type "Poison" while on is set.
type poisonSink struct {
	sink.Sink
	on atomic.Bool
}

func (p *poisonSink) Publish(ctx context.Context, recs []outbox.Record) []error {
	errs := make([]error, len(recs))
	var pass []outbox.Record
	var at []int
	for i, r := range recs {
		if p.on.Load() && r.EventType == "Poison" {
			errs[i] = fmt.Errorf("%w: INVALID_RECORD: refused by the test", sink.ErrPermanent)
			continue
		}
		pass = append(pass, r)
		at = append(at, i)
	}
	if len(pass) > 0 {
		for j, err := range p.Sink.Publish(ctx, pass) {
			errs[at[j]] = err
		}
	}
	return errs
}

// The operations commands (migrate, stats, dlq list, show, replay,
// discard, replay of SENT events, cleanup) and the ops package work through
// PgBouncer in each query exec mode the README names, while a relay runs
// through it: dead letters are listed, shown, replayed (then published with
// what waited behind them, in order) and discarded (never published), SENT
// events are published again, cleanup deletes old SENT rows and keeps the
// rest, and the audit log records each operation.
func TestPgBouncer_OperationsCommands_Work(t *testing.T) {
	t.Parallel()
	for _, mode := range bouncerModes {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			testOperationsBehindPgBouncer(t, mode)
		})
	}
}

func testOperationsBehindPgBouncer(t *testing.T, mode string) {
	e := newBouncerEnv(t, mode)
	e.outbox("migrate")
	d := e.deadLetters()
	e.checkDeadLetterCommands(d)
	d.poison.on.Store(false)
	e.replayAndDiscard(d)
	e.republishAndCleanup(d)
}

// deadLetterFixture is an outbox with two dead letters behind PgBouncer:
// A0 (A1 and A2 wait behind it) and B0 (B1 waits); C0 and C1 are SENT.
type deadLetterFixture struct {
	msgs   []outbox.Message // A0, A1, A2, B0, B1, C0, C1
	a0, b0 outbox.Message
	poison *poisonSink // the relay's sink
}

// deadLetters enqueues the fixture's messages, runs a relay whose sink
// refuses A0 and B0, and waits until they are dead letters (asked through
// the ops package) and the C messages are SENT.
func (e *bouncerEnv) deadLetters() *deadLetterFixture {
	t := e.t
	t.Helper()
	ctx := context.Background()
	msg := func(agg string, n int, eventType string) outbox.Message {
		m := seqMessage(agg, n)
		m.ID = uuid.Must(uuid.NewV7())
		m.EventType = eventType
		return m
	}
	d := &deadLetterFixture{poison: &poisonSink{}}
	d.a0, d.b0 = msg("A", 0, "Poison"), msg("B", 0, "Poison")
	d.msgs = []outbox.Message{d.a0, msg("A", 1, "OrderEvent"), msg("A", 2, "OrderEvent"),
		d.b0, msg("B", 1, "OrderEvent"), msg("C", 0, "OrderEvent"), msg("C", 1, "OrderEvent")}
	if err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error { return e.store.Enqueue(ctx, tx, d.msgs...) }); err != nil {
		t.Fatal(err)
	}
	d.poison.on.Store(true)
	st, err := pgstore.New(e.relayPool(), pgstore.Config{Schema: e.schema})
	if err != nil {
		t.Fatal(err)
	}
	runRelay(t, st, e.addrs, e.topic, func(c *relay.Config) { c.DisableListen = true },
		func(s sink.Sink) sink.Sink { d.poison.Sink = s; return d.poison })
	o, err := ops.New(e.pool, ops.Config{Schema: e.schema})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "A0 and B0 dead-lettered and C sent", 30*time.Second, func() bool {
		s, err := o.Stats(ctx)
		if err != nil {
			t.Fatalf("ops.Stats through PgBouncer: %v", err)
		}
		return s.Counts[outbox.StatusDeadLetter] == 2 && e.count(`SELECT count(*) FROM {{schema}}.outbox_messages WHERE status = 'SENT'`) == 2
	})
	return d
}

// checkDeadLetterCommands checks what stats, dlq list and dlq show say
// about the fixture's dead letters.
func (e *bouncerEnv) checkDeadLetterCommands(d *deadLetterFixture) {
	t := e.t
	t.Helper()
	var stats struct {
		Counts            map[string]int64 `json:"counts"`
		BlockedAggregates int64            `json:"blockedAggregates"`
	}
	e.outboxJSON(&stats, "stats", "--exact")
	if stats.Counts["DEAD_LETTER"] != 2 || stats.Counts["SENT"] != 2 || stats.BlockedAggregates != 2 {
		t.Fatalf("outbox stats: counts %v, %d blocked aggregates; want 2 DEAD_LETTER, 2 SENT, 2 blocked", stats.Counts, stats.BlockedAggregates)
	}
	var list []struct {
		ID      uuid.UUID `json:"id"`
		Waiting int64     `json:"waiting"`
	}
	e.outboxJSON(&list, "dlq", "list")
	if len(list) != 2 || list[0].ID != d.a0.ID || list[1].ID != d.b0.ID || list[0].Waiting != 2 || list[1].Waiting != 1 {
		t.Fatalf("outbox dlq list: %+v; want A0 with 2 waiting, B0 with 1", list)
	}
	var shown struct {
		Status    string `json:"status"`
		LastError string `json:"lastError"`
	}
	e.outboxJSON(&shown, "dlq", "show", d.a0.ID.String())
	if shown.Status != "DEAD_LETTER" || !strings.Contains(shown.LastError, "refused by the test") {
		t.Fatalf("outbox dlq show: %+v; want DEAD_LETTER with the broker's reason", shown)
	}
}

// replayAndDiscard replays A0 (by a filter) and discards B0 (by id) with
// the dlq commands: A0 is published, then A1 and A2; B1 is published,
// B0 never.
func (e *bouncerEnv) replayAndDiscard(d *deadLetterFixture) {
	t := e.t
	t.Helper()
	e.outbox("dlq", "replay", "--all", "--aggregate-id", "A", "--reason", "the broker accepts it now")
	e.outbox("dlq", "discard", d.b0.ID.String(), "--reason", "obsolete")
	var recs, bRecs []*kgo.Record
	for _, r := range consumed(t, e.addrs, e.topic, 6, 30*time.Second) {
		if string(r.Key) == "B" {
			bRecs = append(bRecs, r)
		} else {
			recs = append(recs, r)
		}
	}
	checkOrder(t, recs, map[string]int{"A": 3, "C": 2})
	if len(bRecs) == 0 || header(bRecs[0], "eventId") != d.msgs[4].ID.String() {
		t.Fatal("B1 was not published after B0 was discarded")
	}
	for _, r := range bRecs {
		if header(r, "eventId") == d.b0.ID.String() {
			t.Fatal("the discarded dead letter was published")
		}
	}
	waitFor(t, "every message but the discarded one SENT", 10*time.Second, func() bool {
		return e.count(`SELECT count(*) FROM {{schema}}.outbox_messages WHERE status = 'SENT'`) == 6
	})
}

// republishAndCleanup republishes the SENT messages with the replay
// command, checks the audit log of every operation, and deletes the SENT
// messages with the cleanup command, which keeps the DISCARDED one.
func (e *bouncerEnv) republishAndCleanup(d *deadLetterFixture) {
	t := e.t
	t.Helper()
	since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	e.outbox("replay", "--since", since, "--aggregate-type", "Order", "--name", "rebuild", "--rate", "1000")
	if n := recordsOn(t, e.addrs, e.topic, 12, 30*time.Second); n != 12 {
		t.Fatalf("%d records on the topic after outbox replay; want the 6 published and their 6 copies", n)
	}
	// Published two hours ago, so that cleanup may delete them.
	e.exec(`UPDATE {{schema}}.outbox_messages SET published_at = published_at - interval '2 hours' WHERE status = 'SENT'`)
	var cleaned struct {
		Sent int64 `json:"sent"`
	}
	e.outboxJSON(&cleaned, "cleanup", "--older-than", "1h")
	if cleaned.Sent != 6 {
		t.Fatalf("outbox cleanup deleted %d SENT messages; want 6", cleaned.Sent)
	}
	if n := e.count(`SELECT count(*) FROM {{schema}}.outbox_messages WHERE status = 'DISCARDED'`); n != 1 {
		t.Fatalf("%d DISCARDED messages after cleanup; want the 1 kept for audit", n)
	}
	// Every operation is in the audit log, with its messages or filter.
	if n := e.count(`SELECT count(*) FROM {{schema}}.outbox_audit WHERE
		(action = 'replay' AND message_ids = ARRAY[$1::uuid] AND filter->>'aggregateId' = 'A')
		OR (action = 'discard' AND message_ids = ARRAY[$2::uuid])
		OR (action = 'republish' AND filter->>'name' = 'rebuild' AND count = 6)
		OR (action = 'cleanup' AND count = 6)`, d.a0.ID.String(), d.b0.ID.String()); n != 4 {
		t.Fatalf("%d of the 4 audit entries of replay, discard, republish and cleanup", n)
	}
}

// recordsOn counts the records on topic, reading until atLeast arrived or
// within passed, and then a moment longer so that extra ones show.
func recordsOn(t *testing.T, addrs []string, topic string, atLeast int, within time.Duration) int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	n := 0
	for n < atLeast && ctx.Err() == nil {
		n += cl.PollFetches(ctx).NumRecords()
	}
	settle, done := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer done()
	n += cl.PollFetches(settle).NumRecords()
	return n
}

// sum is the number of events of all aggregates.
func sum(perAggregate map[string]int) int {
	n := 0
	for _, v := range perAggregate {
		n += v
	}
	return n
}

// waitFor polls cond until it holds, or fails the test after within.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Cursor mode works behind PgBouncer too: everything it relies on lasts one
// transaction (the leader's lease is a row, each read takes its snapshot and
// transaction id in one implicit transaction, the seq sequence caches one
// value). Enabled with the cursor command, led by a relay command with
// --no-listen, both through PgBouncer: every committed event reaches the
// broker in order per aggregate and the saved position passes them all.
func TestPgBouncer_CursorMode_DeliversInOrder(t *testing.T) {
	t.Parallel()
	e := newBouncerEnv(t, "exec")
	e.outbox("migrate")
	e.createOrders()
	e.outbox("cursor", "enable")
	p := start(t, e.env(), "relay", "--no-listen", "--poll-interval", "100ms")
	p.waitFor("relay started", 30*time.Second)
	want := e.writeOrders(4, 5, 25)
	total := sum(want)
	checkOrder(t, consumed(t, e.addrs, e.topic, total, 60*time.Second), want)
	var cs struct {
		Mode        string `json:"mode"`
		Leader      string `json:"leader"`
		LagMessages int64  `json:"lagMessages"`
	}
	waitFor(t, "the cursor's saved position passes every message", 10*time.Second, func() bool {
		e.outboxJSON(&cs, "cursor", "status")
		return cs.LagMessages == 0
	})
	if cs.Mode != "cursor" || cs.Leader == "" {
		t.Fatalf("outbox cursor status: %+v; want cursor mode with a leader", cs)
	}
	if n := e.count(`SELECT count(*) FROM {{schema}}.outbox_messages WHERE status <> 'QUEUED'`); n != 0 {
		t.Fatalf("%d messages left the cursor for the table path", n)
	}
	if code := p.stop(30 * time.Second); code != 0 {
		t.Fatalf("relay exited %d after SIGTERM:\n%s", code, p.output())
	}
	if out := p.output(); strings.Contains(out, "level=WARN") || strings.Contains(out, "level=ERROR") {
		t.Fatalf("relay behind PgBouncer warned or failed:\n%s", out)
	}
}

// A relay behind PgBouncer that was not told --no-listen finds out that
// LISTEN delivers nothing there: it says so and how to fix it, does not
// register as idle (so enqueues send no NOTIFY), and publishes everything
// by polling.
func TestPgBouncer_RelayWithListen_WarnsAndPolls(t *testing.T) {
	t.Parallel()
	e := newBouncerEnv(t, "exec")
	e.migrate()
	if _, err := e.store.Notifications(t.Context()); !errors.Is(err, pgstore.ErrListenNotDelivered) {
		t.Fatalf("Store.Notifications through PgBouncer: %v; want ErrListenNotDelivered", err)
	}
	p := start(t, e.env(), "relay", "--poll-interval", "100ms")
	p.waitFor("LISTEN failed; relying on polling", 30*time.Second)
	if !strings.Contains(p.output(), "--no-listen") {
		t.Fatalf("the warning does not name --no-listen:\n%s", p.output())
	}
	want := e.writeOrders(2, 3, 10)
	total := sum(want)
	checkOrder(t, consumed(t, e.addrs, e.topic, total, 60*time.Second), want)
	time.Sleep(time.Second) // a relay with LISTEN registers after 50 ms without work
	if n := e.count(`SELECT count(*) FROM {{schema}}.outbox_idle_relays`); n != 0 {
		t.Fatalf("%d idle registrations: the relay asks writers for NOTIFYs nobody receives", n)
	}
}

// The CDC relay needs a replication connection, which PgBouncer refuses: it
// stops at once with an error that says to connect directly, instead of
// retrying for ever, and creates nothing.
func TestPgBouncer_CDCRelay_FailsClearly(t *testing.T) {
	t.Parallel()
	e := newBouncerEnv(t, "exec")
	e.migrate()
	e.outbox("mode", "set", "cdc")
	p := start(t, e.env(), "relay", "--mode", "cdc")
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("the CDC relay behind PgBouncer still runs after 30 s:\n%s", p.output())
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("exit status %d; want 1:\n%s", code, p.output())
	}
	if !strings.Contains(p.output(), "must connect to PostgreSQL directly") {
		t.Fatalf("the error does not say to connect directly:\n%s", p.output())
	}
	if n := e.count(`SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, cdc.DefaultSlot(e.schema)); n != 0 {
		t.Fatal("a replication slot was created")
	}
}

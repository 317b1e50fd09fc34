package cdc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/relay/cdc"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/sink/kafka"
	"github.com/outbox-dev/outbox/store/pgstore"
)

func TestMain(m *testing.M) {
	dropOrphans()
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// dropOrphans drops the slots and publications that earlier, killed test
// runs left behind: those named after a test schema that no longer exists.
// max_replication_slots is small, so leftovers would make later runs fail.
func dropOrphans() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgtest.URL())
	if err != nil {
		return // the tests report it
	}
	defer conn.Close(ctx)
	_, _ = conn.Exec(ctx, `
		SELECT pg_drop_replication_slot(s.slot_name)
		FROM pg_replication_slots s
		WHERE s.slot_name LIKE 'outbox\_t\_%' AND NOT s.active
		  AND NOT EXISTS (SELECT 1 FROM pg_namespace n WHERE 'outbox_' || n.nspname = s.slot_name)`)
	rows, err := conn.Query(ctx, `
		SELECT p.pubname FROM pg_publication p
		WHERE p.pubname LIKE 'outbox\_t\_%'
		  AND NOT EXISTS (SELECT 1 FROM pg_namespace n WHERE 'outbox_' || n.nspname = p.pubname)`)
	if err != nil {
		return
	}
	names, _ := pgx.CollectRows(rows, pgx.RowTo[string])
	for _, n := range names {
		_, _ = conn.Exec(ctx, "DROP PUBLICATION IF EXISTS "+pgx.Identifier{n}.Sanitize())
	}
}

// env is one test's outbox: a migrated schema, its store, and a broker.
type env struct {
	t      testing.TB
	pool   *pgxpool.Pool
	schema string
	store  *pgstore.Store
	broker *broker.Broker
	topic  string
}

func newEnv(t testing.TB, bcfg broker.Config) *env {
	t.Helper()
	return newEnvPartitioned(t, bcfg, pgstore.Partitioning{})
}

// newEnvPartitioned is newEnv with the outbox table partitioned as p (the
// zero value: a plain table). The outbox is in CDC mode.
func newEnvPartitioned(t testing.TB, bcfg broker.Config, p pgstore.Partitioning) *env {
	t.Helper()
	e := newUnmigratedEnv(t, bcfg, p)
	if err := e.store.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.setMode(pgstore.ModeCDC)
	return e
}

// setMode switches the test's outbox to mode m (pgstore.Store.SetMode).
func (e *env) setMode(m pgstore.Mode) pgstore.ModeSwitch {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sw, err := e.store.SetMode(ctx, m, "test")
	if err != nil {
		e.t.Fatalf("SetMode(%s): %v", m, err)
	}
	return sw
}

// newUnmigratedEnv is newEnvPartitioned without the migrations: the
// test's schema is empty.
func newUnmigratedEnv(t testing.TB, bcfg broker.Config, p pgstore.Partitioning) *env {
	t.Helper()
	pool, schema := pgtest.Schema(t)
	st, err := pgstore.New(pool, pgstore.Config{Schema: schema, Partitioning: p})
	if err != nil {
		t.Fatal(err)
	}
	// Runs after every relay of the test stopped (cleanups run last-in
	// first-out) and before the schema is dropped.
	t.Cleanup(func() { dropSlot(t, pool, schema) })
	bcfg.Listen = "127.0.0.1:0"
	if bcfg.Logger == nil {
		bcfg.Logger = slog.New(slog.DiscardHandler)
	}
	b, err := broker.Start(bcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return &env{t: t, pool: pool, schema: schema, store: st, broker: b, topic: "cdc." + schema}
}

// dropSlot removes the test's slot, once no relay streams from it, its
// publication and its registry row (cdc.Remove).
func dropSlot(t testing.TB, pool *pgxpool.Pool, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cdc.Remove(ctx, pool, schema, "", ""); err != nil {
		t.Logf("remove the CDC slot of %s: %v", schema, err)
	}
}

func quietLogger() *slog.Logger {
	if testing.Verbose() && os.Getenv("CDC_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// newSink returns a Kafka sink on the test's broker; wrap, if not nil,
// wraps it.
func (e *env) newSink(wrap func(sink.Sink) sink.Sink) sink.Sink {
	e.t.Helper()
	ks, err := kafka.New(kafka.Config{Brokers: e.broker.Addrs(), DefaultTopic: e.topic,
		AllowAutoTopicCreation: true, Logger: quietLogger()})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { ks.Close() })
	if wrap != nil {
		return wrap(ks)
	}
	return ks
}

// config is a relay config with short intervals for tests.
func (e *env) config(s sink.Sink) cdc.Config {
	return cdc.Config{
		Pool: e.pool, Sink: s, Schema: e.schema,
		StatusInterval: 100 * time.Millisecond, HeartbeatInterval: time.Second,
		StandbyInterval: 100 * time.Millisecond, TablePathInterval: 100 * time.Millisecond,
		RetryBase: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond,
		ShutdownTimeout: 5 * time.Second, Lease: 5 * time.Second,
		Logger: quietLogger(),
	}
}

// start starts a relay and stops it when the test ends.
func (e *env) start(cfg cdc.Config) *cdc.Relay {
	e.t.Helper()
	r, err := cdc.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = r.Stop(ctx)
	})
	return r
}

// waitLeader waits until r streams from its slot.
func (e *env) waitLeader(r *cdc.Relay, within time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		l, err := r.Lag(context.Background())
		if err == nil && l.Leader {
			return
		}
		select {
		case <-r.Stopped():
			e.t.Fatalf("relay stopped before it became active: %v", r.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	e.t.Fatalf("relay not active within %s", within)
}

type seqPayload struct {
	Aggregate string `json:"aggregate"`
	N         int    `json:"n"`
}

func seqMessage(agg string, n int) outbox.Message {
	p, _ := json.Marshal(seqPayload{Aggregate: agg, N: n})
	return outbox.Message{AggregateType: "Order", AggregateID: agg, EventType: "OrderEvent", Payload: p}
}

// enqueue commits msgs in one transaction.
func (e *env) enqueue(msgs ...outbox.Message) {
	e.t.Helper()
	ctx := context.Background()
	if err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error { return e.store.Enqueue(ctx, tx, msgs...) }); err != nil {
		e.t.Fatal(err)
	}
}

// consumed reads the test's topic from the start until want distinct
// eventIds were read or within passed, and returns every record read,
// duplicates included.
func (e *env) consumed(want int, within time.Duration) []*kgo.Record {
	e.t.Helper()
	return consumeTopic(e.t, e.broker.Addrs(), e.topic, want, within)
}

// consumeTopic reads topic from the start until want distinct eventIds
// were read or within passed, and returns every record read, duplicates
// included.
func consumeTopic(t testing.TB, addrs []string, topic string, want int, within time.Duration) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var recs []*kgo.Record
	distinct := map[string]bool{}
	for len(distinct) < want && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			recs = append(recs, r)
			distinct[header(r, "eventId")] = true
		})
	}
	if len(distinct) < want {
		t.Fatalf("%d of %d messages of %s delivered within %s", len(distinct), want, topic, within)
	}
	return recs
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// checkOrder asserts that every aggregate's events 0..want[agg]-1 were
// delivered and that their first deliveries came in order. It returns the
// number of duplicates.
func checkOrder(t *testing.T, recs []*kgo.Record, want map[string]int) int {
	t.Helper()
	next := map[string]int{}
	seen := map[string]bool{}
	dups := 0
	for _, r := range recs {
		var p seqPayload
		if err := json.Unmarshal(r.Value, &p); err != nil {
			t.Fatalf("bad payload %q: %v", r.Value, err)
		}
		id := header(r, "eventId")
		if seen[id] {
			dups++
			continue
		}
		seen[id] = true
		if p.N != next[p.Aggregate] {
			t.Fatalf("aggregate %s: first delivery of event %d came when %d was expected next: order broken", p.Aggregate, p.N, next[p.Aggregate])
		}
		next[p.Aggregate]++
	}
	for agg, n := range want {
		if next[agg] != n {
			t.Fatalf("aggregate %s: %d of %d events delivered", agg, next[agg], n)
		}
	}
	return dups
}

// counts returns the number of messages per status.
func (e *env) counts() map[outbox.Status]int64 {
	e.t.Helper()
	c, err := e.store.Counts(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// waitCounts waits until the table has want messages of status.
func (e *env) waitCount(status outbox.Status, want int64, within time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(within)
	var got int64
	for time.Now().Before(deadline) {
		got = e.counts()[status]
		if got == want {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.t.Fatalf("%d messages %s after %s; want %d (all: %v)", got, status, within, want, e.counts())
}

func fmtAgg(i int) string { return fmt.Sprintf("agg-%03d", i) }

// holdSetup holds the advisory lock of the setup of cfg's relays, so that
// none of them sets up (and checks the mode) until the returned func
// releases it.
func (e *env) holdSetup(cfg cdc.Config) (release func()) {
	e.t.Helper()
	ctx := context.Background()
	conn, err := e.pool.Acquire(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	key := cdc.SetupLockKey(cfg)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
		conn.Release()
		e.t.Fatal(err)
	}
	return func() {
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", key); err != nil {
			e.t.Error(err)
		}
		conn.Release()
	}
}

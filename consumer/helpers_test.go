package consumer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/consumer"
	"github.com/outbox-dev/outbox/inbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
)

const topic = "orders"

// env is what most tests need: an embedded broker with the topic "orders",
// a migrated inbox in the test's own schema, and a business table
// "effects" in the same schema, written by env.apply.
type env struct {
	broker   *broker.Broker
	pool     *pgxpool.Pool
	schema   string
	inbox    *inbox.Inbox
	producer *kgo.Client
}

func setup(t *testing.T, partitions int) *env {
	t.Helper()
	pool, schema := pgtest.Schema(t)
	e := setupBroker(t, partitions)
	ib, err := inbox.New(pool, inbox.Config{Schema: schema, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := ib.Migrate(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	e.pool, e.schema, e.inbox = pool, schema, ib
	e.exec(t, `CREATE TABLE {{schema}}.effects (
		n          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		message_id uuid   NOT NULL,
		aggregate  text   NOT NULL,
		seq        int    NOT NULL,
		partition  int    NOT NULL,
		record_offset bigint NOT NULL
	)`)
	return e
}

// setupBroker returns an env with only the broker (topic "orders") and the
// producer, for tests that bring their own inbox as Config.Applier.
func setupBroker(t *testing.T, partitions int) *env {
	t.Helper()
	b, err := broker.Start(broker.Config{Listen: "127.0.0.1:0", Partitions: partitions, SeedTopics: []string{topic},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(b.Close)
	producer, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(producer.Close)
	return &env{broker: b, producer: producer}
}

// testLogger logs warnings to stderr with -v, and nothing otherwise.
func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return slog.New(slog.DiscardHandler)
}

// testCtx is a context that ends with the test, bounded to 60 s.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (e *env) sql(s string) string {
	return strings.ReplaceAll(s, "{{schema}}", pgx.Identifier{e.schema}.Sanitize())
}

func (e *env) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := e.pool.Exec(testCtx(t), e.sql(sql), args...); err != nil {
		t.Fatalf("exec %q: %v", sql, err)
	}
}

func (e *env) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(testCtx(t), e.sql(sql), args...).Scan(&n); err != nil {
		t.Fatalf("count %q: %v", sql, err)
	}
	return n
}

// effects counts the effect rows of a message.
func (e *env) effects(t *testing.T, id uuid.UUID) int {
	t.Helper()
	return e.count(t, "SELECT count(*) FROM {{schema}}.effects WHERE message_id = $1", id)
}

// payload is what test events carry.
type payload struct {
	Seq int `json:"seq"`
}

// event is a record as the relay writes it: key = aggregate id, headers
// eventId and eventType, a JSON payload; on a chosen partition.
func event(partition int32, aggregate string, seq int) *kgo.Record {
	value, _ := json.Marshal(payload{Seq: seq})
	return &kgo.Record{
		Topic: topic, Partition: partition, Key: []byte(aggregate), Value: value,
		Headers: []kgo.RecordHeader{
			{Key: "eventId", Value: []byte(uuid.NewString())},
			{Key: "eventType", Value: []byte("OrderPlaced")},
			{Key: "aggregateType", Value: []byte("Order")},
		},
	}
}

// idOf is the eventId of a record made by event.
func idOf(r *kgo.Record) uuid.UUID {
	for _, h := range r.Headers {
		if h.Key == "eventId" {
			return uuid.MustParse(string(h.Value))
		}
	}
	panic("record without eventId")
}

func (e *env) produce(t *testing.T, recs ...*kgo.Record) {
	t.Helper()
	if err := e.producer.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// apply is a handler that writes one effect row per message.
func (e *env) apply(ctx context.Context, tx pgx.Tx, m inbox.Message) error {
	var p payload
	if err := json.Unmarshal(m.Payload, &p); err != nil {
		return fmt.Errorf("payload: %v: %w", err, inbox.ErrPermanent)
	}
	_, err := tx.Exec(ctx, e.sql(`INSERT INTO {{schema}}.effects (message_id, aggregate, seq, partition, record_offset)
		VALUES ($1, $2, $3, $4, $5)`), m.ID, m.AggregateID, p.Seq, m.Partition, m.Offset)
	return err
}

// start runs a Runner for cfg, with the env's broker, topic and (unless
// cfg.Applier is set) inbox and handler filled in, until the returned stop is called or the test ends. stop
// checks that Run returned nil.
func (e *env) start(t *testing.T, cfg consumer.Config) (stop func()) {
	t.Helper()
	if cfg.Brokers == nil {
		cfg.Brokers = e.broker.Addrs()
	}
	if cfg.Topics == nil {
		cfg.Topics = []string{topic}
	}
	if cfg.Inbox == nil && cfg.Applier == nil {
		cfg.Inbox = e.inbox
	}
	if cfg.Handler == nil && cfg.Applier == nil {
		cfg.Handler = e.apply
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger()
	}
	// Notice rebalances and new records quickly.
	cfg.ExtraOpts = append([]kgo.Opt{kgo.HeartbeatInterval(100 * time.Millisecond), kgo.FetchMaxWait(100 * time.Millisecond)},
		cfg.ExtraOpts...)
	r, err := consumer.New(cfg)
	if err != nil {
		t.Fatalf("consumer.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run returned %v, want nil after a clean stop", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("Run did not return within 30s of its context ending")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// recorder records what the hooks report.
type recorder struct {
	mu      sync.Mutex
	results map[uuid.UUID][]inbox.Result
	order   []uuid.UUID // handled messages in the order reported
	parked  []inbox.Message
	causes  []error
	retried map[uuid.UUID]int
}

func newRecorder() *recorder {
	return &recorder{results: map[uuid.UUID][]inbox.Result{}, retried: map[uuid.UUID]int{}}
}

func (r *recorder) hooks() consumer.Hooks {
	return consumer.Hooks{
		Handled: func(m inbox.Message, res inbox.Result, _ time.Duration) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.results[m.ID] = append(r.results[m.ID], res)
			r.order = append(r.order, m.ID)
		},
		Parked: func(m inbox.Message, err error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.parked = append(r.parked, m)
			r.causes = append(r.causes, err)
		},
		Retried: func(m inbox.Message, _ error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.retried[m.ID]++
		},
	}
}

// handled returns how many deliveries were handled, and of them how many
// with result res (any result when res is 0).
func (r *recorder) handled(res inbox.Result) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rs := range r.results {
		for _, got := range rs {
			if res == 0 || got == res {
				n++
			}
		}
	}
	return n
}

// resultsOf returns the results reported for a message.
func (r *recorder) resultsOf(id uuid.UUID) []inbox.Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]inbox.Result(nil), r.results[id]...)
}

func (r *recorder) parkedCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.parked)
}

func (r *recorder) retriedOf(id uuid.UUID) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.retried[id]
}

// waitFor polls cond until it holds, failing the test after 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outbox-dev/outbox"
	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/internal/freeport"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/relay"
	"github.com/outbox-dev/outbox/relay/cursor"
	"github.com/outbox-dev/outbox/sink"
	"github.com/outbox-dev/outbox/sink/kafka"
	"github.com/outbox-dev/outbox/store"
	"github.com/outbox-dev/outbox/store/pgstore"
)

// A topic that does not exist is a configuration gap, not the messages'
// fault: its messages wait (FAILED, no attempt counted, never dead) while
// the other topics flow, and once the topic is created they go out, in
// order per aggregate. In claim mode and in cursor mode.
func TestMissingTopic_MessagesWaitThenGoOutInOrder(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"claim", "cursor"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			testMissingTopic(t, mode == "cursor")
		})
	}
}

func testMissingTopic(t *testing.T, cursorMode bool) {
	pool, schema := pgtest.Schema(t)
	st, err := pgstore.New(pool, pgstore.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var q store.Queue = st
	if cursorMode {
		if err := st.EnableCursor(ctx); err != nil {
			t.Fatal(err)
		}
		q = cursor.New(st).Queue()
	}
	b, err := broker.Start(broker.Config{Listen: "127.0.0.1:0", NoAutoCreateTopics: true, SeedTopics: []string{"orders"}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	ks, err := kafka.New(kafka.Config{Brokers: b.Addrs(), DefaultTopic: "orders",
		TopicByAggregateType: map[string]string{"Invoice": "invoices"}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ks.Close() }) // after the relay stopped
	counted := &countingSink{Sink: ks}
	startTestRelay(t, relay.Config{Strategy: strategyFor(q), Sink: counted, PollInterval: 100 * time.Millisecond, Lease: 5 * time.Second,
		RetryBase: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond, MaxAttempts: 2, Logger: quietLogger()})

	e := &env{t: t, pool: pool, store: st, schema: schema, addrs: b.Addrs(), topic: "orders"}
	var invoices []uuid.UUID
	for n := range 3 {
		m := seqMessage("inv-1", n)
		m.ID, m.AggregateType = uuid.Must(uuid.NewV7()), "Invoice"
		invoices = append(invoices, m.ID)
		e.enqueue(m, seqMessage(fmt.Sprint("order-", n), 0))
	}
	if recs := consumed(t, b.Addrs(), "orders", 3, 30*time.Second); len(recs) < 3 {
		t.Fatalf("%d of 3 orders delivered while the invoices topic was missing", len(recs))
	}

	// The head waits through several tries; MaxAttempts is 2, so a
	// counted attempt would have dead-lettered it.
	before := counted.calls.Load()
	waitFor(t, "the relay tried the invoice again three times", 30*time.Second, func() bool { return counted.calls.Load() >= before+3 })
	head := e.status(invoices[0])
	if head.Status != outbox.StatusFailed || head.Attempts != 0 ||
		!strings.Contains(head.LastError, "UNKNOWN_TOPIC_OR_PARTITION") || !strings.Contains(head.LastError, "invoices") {
		t.Fatalf("head of the missing topic: status %s, attempts %d, last error %q; want FAILED, 0 attempts, the reason and the topic",
			head.Status, head.Attempts, head.LastError)
	}
	for _, id := range invoices[1:] {
		if rec := e.status(id); rec.Status == outbox.StatusSent || rec.Status == outbox.StatusDeadLetter {
			t.Fatalf("a later invoice is %s while its head waits", rec.Status)
		}
	}
	if st := topicStatus(ks, "invoices"); !st.Unavailable() || st.Reason != "UNKNOWN_TOPIC_OR_PARTITION" {
		t.Errorf("the sink's status of invoices = %+v, want unavailable, UNKNOWN_TOPIC_OR_PARTITION", st)
	}

	if err := b.CreateTopics(ctx, 0, "invoices"); err != nil {
		t.Fatal(err)
	}
	recs := consumed(t, b.Addrs(), "invoices", 3, 30*time.Second)
	if dups := checkOrder(t, recs, map[string]int{"inv-1": 3}); dups != 0 {
		t.Logf("%d duplicates", dups)
	}
	for _, id := range invoices {
		e.waitStatus(id, outbox.StatusSent, 10*time.Second)
	}
}

// startTestRelay runs an in-process relay until the test ends.
func startTestRelay(t *testing.T, cfg relay.Config) {
	t.Helper()
	r, err := relay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		c, done := context.WithTimeout(context.Background(), 30*time.Second)
		defer done()
		_ = r.Stop(c)
	})
}

// topicStatus returns what s knows of topic.
func topicStatus(s sink.TopicReporter, topic string) sink.TopicStatus {
	for _, st := range s.Topics() {
		if st.Topic == topic {
			return st
		}
	}
	return sink.TopicStatus{}
}

// The newcomer's path, with no flags beyond where things are: `outbox
// broker`, `outbox migrate`, `outbox relay`, and an event for a topic
// nobody created reaches it. While another relay waits for a topic that a
// production-like broker lacks, its /readyz is not ready and names the
// topic.
func TestNewcomerPath_NoFlags_EventsReachTheirTopic(t *testing.T) {
	t.Parallel()
	e := newEnv(t) // migrated schema; its own broker is not used here
	brokerAddr := freeAddr(t)
	bp := start(t, nil, "broker", "--listen", brokerAddr)
	bp.waitFor("broker listening on", 30*time.Second)
	e.addrs = []string{brokerAddr}
	rp := start(t, nil, "relay", "--database-url", pgtest.URL(), "--schema", e.schema, "--kafka-brokers", brokerAddr)
	rp.waitFor("relay starting", 30*time.Second)

	m := oneMessage(t)
	m.Topic = "orders." + e.schema
	e.enqueue(m)
	e.waitStatus(m.ID, outbox.StatusSent, 30*time.Second)
	if recs := consumed(t, e.addrs, m.Topic, 1, 30*time.Second); len(recs) != 1 || header(recs[0], "eventId") != m.ID.String() {
		t.Fatalf("topic %s holds %d records, want the event %s", m.Topic, len(recs), m.ID)
	}
	rp.waitFor("first message published to topic", 10*time.Second)
}

// Against a broker that does not create topics, a relay whose topic is
// missing says so: /readyz is not ready and names the topic, and the log
// says how to fix it.
func TestMissingTopic_ReadyzNamesTheTopic(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b, err := broker.Start(broker.Config{Listen: "127.0.0.1:0", NoAutoCreateTopics: true, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	admin := freeAddr(t)
	rp := start(t, nil, "relay", "--database-url", pgtest.URL(), "--schema", e.schema,
		"--kafka-brokers", strings.Join(b.Addrs(), ","), "--default-topic", "missing-"+e.schema, "--metrics-addr", admin)
	rp.waitFor("configured topic does not exist", 30*time.Second)
	m := oneMessage(t)
	e.enqueue(m)
	rp.waitFor("topic cannot take records", 30*time.Second)
	waitFor(t, "/readyz not ready naming the topic", 10*time.Second, func() bool {
		code, body := get(t, "http://"+admin+"/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "missing-"+e.schema)
	})
	if rec := e.status(m.ID); rec.Status == outbox.StatusDeadLetter || rec.Attempts != 0 {
		t.Fatalf("message is %s with %d attempts; a missing topic must cost nothing", rec.Status, rec.Attempts)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	a, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// get returns the status code and body of a GET of url.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

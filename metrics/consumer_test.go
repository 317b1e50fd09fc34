package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outbox-dev/outbox/broker"
	"github.com/outbox-dev/outbox/consumer"
	"github.com/outbox-dev/outbox/inbox"
	"github.com/outbox-dev/outbox/internal/pgtest"
	"github.com/outbox-dev/outbox/metrics"
)

// A real consumer runner over a known stream: 5 distinct events, 2 of them
// delivered twice, 1 that always fails. The counters say exactly that.
func TestConsumerMetrics_AfterAKnownWorkload(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ib, b, producer := consumerSetup(t)
	var err error
	var recs []*kgo.Record
	ids := make([]uuid.UUID, 6)
	for i := range ids {
		ids[i] = uuid.Must(uuid.NewV7())
	}
	for i, id := range ids {
		typ := "OrderPlaced"
		if i == 5 {
			typ = "Poison"
		}
		recs = append(recs, record(id, typ))
	}
	recs = append(recs, record(ids[0], "OrderPlaced"), record(ids[1], "OrderPlaced"))
	if err := producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	m, err := metrics.NewConsumer(reg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := consumer.New(consumer.Config{
		Brokers: b.Addrs(), Group: "billing", Topics: []string{"orders"}, Inbox: ib,
		MaxAttempts: 2, RetryBase: time.Millisecond, RetryMax: 5 * time.Millisecond,
		Handler: func(ctx context.Context, tx pgx.Tx, msg inbox.Message) error {
			if msg.EventType == "Poison" {
				return errors.New("cannot bill this")
			}
			return nil
		},
		Hooks: m.Hooks("billing"),
	})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	defer func() { cancel(); <-done }()

	want := map[string]float64{"processed": 5, "duplicate": 2}
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, _ := metricValue(reg, "outbox_consumer_handled_total", "processed")
		d, _ := metricValue(reg, "outbox_consumer_handled_total", "duplicate")
		parked, _ := metricValue(reg, "outbox_consumer_parked_total", "")
		if p == want["processed"] && d == want["duplicate"] && parked == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processed %v duplicate %v parked %v; want 5, 2, 1", p, d, parked)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n, _ := metricValue(reg, "outbox_consumer_retries_total", ""); n != 1 {
		t.Errorf("retries = %v; want 1 (2 attempts, then parked)", n)
	}
	if n := testutil.CollectAndCount(reg, "outbox_consumer_handler_seconds"); n != 1 {
		t.Errorf("handler latency series = %d; want 1", n)
	}
}

func record(id uuid.UUID, eventType string) *kgo.Record {
	return &kgo.Record{Topic: "orders", Key: []byte("o-1"), Value: []byte(`{}`), Headers: []kgo.RecordHeader{
		{Key: "eventId", Value: []byte(id.String())}, {Key: "eventType", Value: []byte(eventType)},
		{Key: "eventVersion", Value: []byte("1")}, {Key: "aggregateType", Value: []byte("Order")},
	}}
}

// metricValue returns the value of a counter series whose label values
// include label ("" = the first series).
func metricValue(reg *prometheus.Registry, name, label string) (float64, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if label == "" || lp.GetValue() == label {
					return m.GetCounter().GetValue(), nil
				}
			}
		}
	}
	return 0, fmt.Errorf("%s{%s} not found", name, label)
}

// consumerSetup returns a migrated inbox in a schema of its own, a
// one-partition embedded broker and a producer to it, closed when the test
// ends.
func consumerSetup(t *testing.T) (*inbox.Inbox, *broker.Broker, *kgo.Client) {
	t.Helper()
	pool, schema := pgtest.Schema(t)
	ib, err := inbox.New(pool, inbox.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := ib.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := broker.Start(broker.Config{Listen: "127.0.0.1:0", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	producer, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(producer.Close)
	return ib, b, producer
}
